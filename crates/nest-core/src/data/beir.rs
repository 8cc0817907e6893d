//! BEIR retrieval layout: `corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::TsvTable;
use crate::{Error, Result};

/// A retrieval dataset, with the problems found while reading it counted (not fatal).
#[derive(Debug, Clone)]
pub struct Beir {
    pub dir: PathBuf,
    /// `(id, title + " " + text)` in file order, duplicates removed (first kept).
    pub corpus: Vec<(String, String)>,
    /// `(id, text)` of the queries that have at least one relevant document in the qrels.
    pub queries: Vec<(String, String)>,
    /// query id -> (doc id -> relevance > 0).
    pub qrels: BTreeMap<String, HashMap<String, i64>>,
    pub warnings: Vec<String>,
}

#[derive(serde::Deserialize)]
struct Doc {
    #[serde(rename = "_id")]
    id: String,
    #[serde(default)]
    title: String,
    text: String,
}

fn read_jsonl(path: &Path) -> Result<Vec<Doc>> {
    let raw = crate::fsutil::read_text(path)?;
    let mut out = Vec::new();
    for (i, line) in raw.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let d: Doc = serde_json::from_str(line).map_err(|e| Error::Row {
            path: path.to_path_buf(),
            line: i as u64 + 1,
            message: format!(
                "expected {{\"_id\": string, \"title\"?: string, \"text\": string}}: {e}"
            ),
        })?;
        out.push(d);
    }
    if out.is_empty() {
        return Err(Error::content(path, "no records"));
    }
    Ok(out)
}

impl Beir {
    /// Reads `dir/corpus.jsonl`, `dir/queries.jsonl` and `dir/qrels/<split>.tsv`.
    ///
    /// Counted warnings (the run goes on): duplicate corpus or query ids (first kept), qrels
    /// naming a document not in the corpus (still counted as relevant, as pytrec_eval does, so
    /// recall cannot reach 1 for that query), qrels naming an unknown query (dropped), and
    /// queries with no relevant document (not evaluated, as in BEIR).
    pub fn read(dir: &Path, split: &str) -> Result<Self> {
        let mut warnings = Vec::new();
        let (corpus, seen) = read_corpus(dir, &mut warnings)?;
        let (qorder, mut qtext) = read_queries(dir, &mut warnings)?;
        let qpath = dir.join("qrels").join(format!("{split}.tsv"));
        let qrels = read_qrels(&qpath, &seen, &qtext, &mut warnings)?;
        let queries: Vec<(String, String)> = qorder
            .into_iter()
            .filter(|id| qrels.contains_key(id))
            .map(|id| {
                let text = qtext.remove(&id).unwrap_or_default();
                (id, text)
            })
            .collect();
        if queries.is_empty() {
            return Err(Error::content(&qpath, "no query has a relevant document"));
        }
        Ok(Beir {
            dir: dir.to_path_buf(),
            corpus,
            queries,
            qrels,
            warnings,
        })
    }
}

/// (id, text) pairs in file order.
type Texts = Vec<(String, String)>;

/// `corpus.jsonl`: (id, "title text") in file order, first of duplicate ids kept; and the ids.
fn read_corpus(dir: &Path, warnings: &mut Vec<String>) -> Result<(Texts, HashSet<String>)> {
    let mut seen = HashSet::new();
    let mut dups = 0;
    let mut corpus = Vec::new();
    for d in read_jsonl(&dir.join("corpus.jsonl"))? {
        if !seen.insert(d.id.clone()) {
            dups += 1;
            continue;
        }
        let text = if d.title.is_empty() {
            d.text
        } else {
            format!("{} {}", d.title, d.text)
        };
        corpus.push((d.id, text));
    }
    if dups > 0 {
        warnings.push(format!("corpus.jsonl: {dups} duplicate _id(s), first kept"));
    }
    Ok((corpus, seen))
}

/// `queries.jsonl`: ids in file order and id -> text, first of duplicate ids kept.
fn read_queries(
    dir: &Path,
    warnings: &mut Vec<String>,
) -> Result<(Vec<String>, HashMap<String, String>)> {
    let mut qtext: HashMap<String, String> = HashMap::new();
    let mut qorder = Vec::new();
    let mut qdups = 0;
    for q in read_jsonl(&dir.join("queries.jsonl"))? {
        if qtext.contains_key(&q.id) {
            qdups += 1;
            continue;
        }
        qorder.push(q.id.clone());
        qtext.insert(q.id, q.text);
    }
    if qdups > 0 {
        warnings.push(format!(
            "queries.jsonl: {qdups} duplicate _id(s), first kept"
        ));
    }
    Ok((qorder, qtext))
}

/// `qrels/<split>.tsv`: query id -> (corpus id -> positive score); judgements of unknown
/// queries are dropped, of unknown documents kept (both counted in `warnings`).
fn read_qrels(
    qpath: &Path,
    docs: &HashSet<String>,
    queries: &HashMap<String, String>,
    warnings: &mut Vec<String>,
) -> Result<BTreeMap<String, HashMap<String, i64>>> {
    let t = TsvTable::read(qpath, &["query-id", "corpus-id", "score"])?;
    let mut qrels: BTreeMap<String, HashMap<String, i64>> = BTreeMap::new();
    let (mut unknown_doc, mut unknown_query) = (0, 0);
    for (line, r) in &t.rows {
        let score: i64 = r[2]
            .trim()
            .parse()
            .map_err(|_| t.row_error(*line, format!("score '{}' is not an integer", r[2])))?;
        if !queries.contains_key(&r[0]) {
            unknown_query += 1;
            continue;
        }
        if !docs.contains(&r[1]) {
            unknown_doc += 1;
        }
        if score > 0 {
            qrels
                .entry(r[0].clone())
                .or_default()
                .insert(r[1].clone(), score);
        }
    }
    if unknown_doc > 0 {
        warnings.push(format!(
            "{}: {unknown_doc} judgement(s) name a corpus-id not in corpus.jsonl",
            qpath.display()
        ));
    }
    if unknown_query > 0 {
        warnings.push(format!(
            "{}: {unknown_query} judgement(s) name a query-id not in queries.jsonl (dropped)",
            qpath.display()
        ));
    }
    Ok(qrels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_counts_problems() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir_all(p.join("qrels")).unwrap();
        std::fs::write(p.join("corpus.jsonl"), "{\"_id\":\"d1\",\"title\":\"T\",\"text\":\"one\"}\n{\"_id\":\"d1\",\"text\":\"dup\"}\n{\"_id\":\"d2\",\"text\":\"two\"}\n").unwrap();
        std::fs::write(
            p.join("queries.jsonl"),
            "{\"_id\":\"q1\",\"text\":\"a\"}\n{\"_id\":\"q2\",\"text\":\"b\"}\n",
        )
        .unwrap();
        std::fs::write(
            p.join("qrels/test.tsv"),
            "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td9\t1\nq7\td2\t1\nq2\td2\t0\n",
        )
        .unwrap();
        let b = Beir::read(p, "test").unwrap();
        assert_eq!(b.corpus.len(), 2);
        assert_eq!(b.corpus[0].1, "T one");
        assert_eq!(b.queries.len(), 1, "q2 has no relevant document");
        assert_eq!(b.qrels["q1"].len(), 2);
        assert_eq!(b.warnings.len(), 3, "{:?}", b.warnings);
        std::fs::write(p.join("corpus.jsonl"), "{\"id\":\"x\"}\n").unwrap();
        let e = Beir::read(p, "test").unwrap_err().to_string();
        assert!(e.contains("corpus.jsonl, line 1"), "{e}");
    }
}
