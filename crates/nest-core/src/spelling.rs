//! "Did you mean": the one rule for naming the key, field or variable a misspelt name most
//! likely meant (recipe keys, request fields, `NEST_*` variables).

/// The candidate closest to `name` in Damerau-Levenshtein distance (an adjacent swap counts
/// one edit), if it is within a third of the candidate's length (at least one edit); the first
/// of equally close ones.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(name, c), c))
        .filter(|(d, c)| *d <= (c.chars().count() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn close_spellings_and_only_those() {
        let keys = ["layers", "dimensions", "batch_size", "lr", "epochs"];
        assert_eq!(closest("layer", keys), Some("layers"));
        assert_eq!(closest("dimensinos", keys), Some("dimensions"));
        assert_eq!(closest("batchsize", keys), Some("batch_size"));
        assert_eq!(closest("epoch", keys), Some("epochs"));
        assert_eq!(closest("rl", keys), Some("lr"));
        assert_eq!(closest("temperature", keys), None);
        assert_eq!(closest("x", keys), None);
        // the first of equally close candidates
        assert_eq!(closest("ab", ["aa", "bb"]), Some("aa"));
    }
}
