//! The elastic grid: which layers (early exit) and which prefix dimensions (Matryoshka).

use crate::{Error, Result};

/// One operating point of an elastic model: run `layer` transformer layers, keep the first `dim`
/// coordinates of the pooled vector, then L2-normalise.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct ElasticSpec {
    /// Number of transformer layers computed, `1..=num_layers`.
    pub layer: usize,
    /// Prefix length kept, `1..=hidden_size`.
    pub dim: usize,
}

impl ElasticSpec {
    /// Checks the point against a model of `num_layers` layers and `hidden_size` dimensions.
    pub fn validate(&self, num_layers: usize, hidden_size: usize) -> Result<()> {
        check_layers("layer", &[self.layer], num_layers)?;
        check_dims("dim", &[self.dim], hidden_size)
    }
}

/// Parses a layer list such as `6`, `1-6`, `1,3,6` or `2-4,6` (sorted, duplicates removed).
pub fn parse_layers(s: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once('-') {
            let a = parse_pos("--layers", a)?;
            let b = parse_pos("--layers", b)?;
            if a > b {
                return Err(Error::value(
                    "--layers",
                    format!("range '{part}' runs backwards"),
                ));
            }
            out.extend(a..=b);
        } else {
            out.push(parse_pos("--layers", part)?);
        }
    }
    finish("--layers", s, out)
}

/// Parses a dimension list such as `16,32,64` (sorted, duplicates removed).
pub fn parse_dims(s: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        out.push(parse_pos("--dims", part)?);
    }
    finish("--dims", s, out)
}

fn parse_pos(key: &str, s: &str) -> Result<usize> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err(Error::value(key, "values start at 1, got 0")),
        Ok(v) => Ok(v),
        Err(_) => Err(Error::value(
            key,
            format!("'{s}' is not a positive integer"),
        )),
    }
}

fn finish(key: &str, raw: &str, mut v: Vec<usize>) -> Result<Vec<usize>> {
    if v.is_empty() {
        return Err(Error::value(key, format!("'{raw}' names no value")));
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// Every layer must be in `1..=num_layers`. `key` is the flag, recipe key or API field the user
/// wrote (`--layer`, `eval_layers`, `layers`), so that the error names it.
///
/// This is the one range check for layers; callers that hold a model go through
/// `nest_model::point`, which calls it.
pub fn check_layers(key: &str, layers: &[usize], num_layers: usize) -> Result<()> {
    for &l in layers {
        if l == 0 || l > num_layers {
            return Err(Error::value(
                key,
                format!("layer {l} is outside the model's 1..={num_layers} (it has {num_layers} layers)"),
            ));
        }
    }
    Ok(())
}

/// Every dim must be in `1..=hidden_size`. `key` is the flag, recipe key or API field the user
/// wrote, so that the error names it. The one range check for dims (see [`check_layers`]).
pub fn check_dims(key: &str, dims: &[usize], hidden_size: usize) -> Result<()> {
    for &d in dims {
        if d == 0 || d > hidden_size {
            return Err(Error::value(
                key,
                format!(
                    "dimension {d} is outside the model's 1..={hidden_size} (it gives at most {hidden_size} dims)"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_ranges_and_lists() {
        assert_eq!(parse_layers("1-3,6").unwrap(), vec![1, 2, 3, 6]);
        assert_eq!(parse_layers("6, 2,2").unwrap(), vec![2, 6]);
        assert!(parse_layers("3-1").is_err());
        assert!(parse_layers("0").is_err());
        assert!(parse_layers("a").is_err());
        assert!(parse_layers("").is_err());
    }

    #[test]
    fn dims_and_validation() {
        assert_eq!(parse_dims("64,16,32").unwrap(), vec![16, 32, 64]);
        let e = check_dims("eval_dims", &[385], 384)
            .unwrap_err()
            .to_string();
        assert!(e.contains("eval_dims") && e.contains("385"), "{e}");
        assert!(check_layers("--layer", &[7], 6).is_err());
        assert!(ElasticSpec { layer: 6, dim: 384 }.validate(6, 384).is_ok());
    }
}
