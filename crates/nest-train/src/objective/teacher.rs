//! A teacher's vectors of the training texts, found by text (what `nest distill` caches and
//! its `distill` components read).

use std::collections::HashMap;

use tch::Tensor;

/// The teacher's vectors of the training texts, found by text.
#[derive(Debug)]
pub struct TeacherTable {
    /// `[n, teacher dim]`.
    vectors: Tensor,
    rows: HashMap<String, i64>,
}

impl TeacherTable {
    /// The table of `texts` (row `i` of `vectors` is `texts[i]`).
    pub fn new(texts: &[String], vectors: Tensor) -> Self {
        let rows = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as i64))
            .collect();
        TeacherTable { vectors, rows }
    }

    pub(crate) fn dim(&self) -> usize {
        self.vectors.size()[1] as usize
    }

    /// The rows of `texts`, or the first text the table lacks.
    ///
    /// # Shapes
    /// - returns `[texts.len(), teacher dim]`
    pub(crate) fn lookup(&self, texts: &[&str]) -> std::result::Result<Tensor, String> {
        let idx: Vec<i64> = texts
            .iter()
            .map(|&t| self.rows.get(t).copied().ok_or_else(|| t.to_string()))
            .collect::<std::result::Result<_, _>>()?;
        Ok(self.vectors.index_select(0, &Tensor::from_slice(&idx)))
    }
}
