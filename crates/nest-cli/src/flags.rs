//! The one reader of recipe flags: the argv clap leaves after a command's first unknown flag
//! (`nest train --lr 2e-5 --run-dir r ...`) becomes the command's own flags, taken back out
//! wherever they stand, and typed recipe [`Overrides`]. nest-train never sees argv.

use anyhow::{bail, Result};
use nest_train::recipe::{parse_value, Overrides};

/// Reads `argv` once: each `--flag [value]` / `--flag=value` that `own` takes (returns true
/// for) is the command's; `own` gets the flag, whether its value was inline, and a getter for
/// its value (an error when the next word is another flag, which it leaves in place). Every other flag is a recipe key with a value (TOML where it reads as TOML, else
/// text: [`parse_value`]), kept in order, named in errors as written.
pub fn split(
    argv: Vec<String>,
    mut own: impl FnMut(&str, bool, &mut dyn FnMut() -> Result<String>) -> Result<bool>,
) -> Result<Overrides> {
    let mut overrides = Overrides::new();
    let mut it = argv.into_iter().peekable();
    while let Some(f) = it.next() {
        let (flag, inline) = match f.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k.to_string(), Some(v.to_string())),
            _ => (f.clone(), None),
        };
        let has_inline = inline.is_some();
        let mut inline = inline;
        // the next word, unless it is the next flag (`--resume --max-steps 4` read `--max-steps`
        // as the run folder)
        let mut value = || {
            inline
                .take()
                .or_else(|| it.next_if(|n| !n.starts_with("--")))
                .ok_or_else(|| anyhow::anyhow!("{flag} needs a value"))
        };
        if own(&flag, has_inline, &mut value)? {
            continue;
        }
        // the global flag after a recipe flag (clap takes it only before the first one)
        if flag == "--threads" {
            let raw = value()?;
            let t = raw
                .trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("--threads: '{raw}' is not a whole number"))?;
            crate::cmd::set_threads(t)?;
            continue;
        }
        let Some(key) = flag.strip_prefix("--").filter(|k| !k.is_empty()) else {
            bail!("expected a --key flag, got '{f}'");
        };
        let raw = value()?;
        overrides.push(key, parse_value(&raw), flag.as_str());
    }
    Ok(overrides)
}

/// Recipe flags alone (no flag of the command's own): `["--lr", "2e-5", ...]`; the tests'
/// way in (`nest bench train`, its last caller, builds typed overrides in nest-bench).
#[cfg(test)]
pub fn overrides<S: AsRef<str>>(argv: &[S]) -> Result<Overrides> {
    split(
        argv.iter().map(|s| s.as_ref().to_string()).collect(),
        |_, _, _| Ok(false),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_flags_anywhere_and_recipe_keys_typed_in_order() {
        let argv = [
            "--lr",
            "2e-5",
            "--overwrite",
            "--batch-size=16",
            "--run-dir",
            "r",
            "--model",
            "m",
        ];
        let (mut overwrite, mut run_dir) = (false, None);
        let ov = split(
            argv.iter().map(|s| s.to_string()).collect(),
            |flag, _, value| {
                match flag {
                    "--overwrite" => overwrite = true,
                    "--run-dir" => run_dir = Some(value()?),
                    _ => return Ok(false),
                }
                Ok(true)
            },
        )
        .unwrap();
        assert!(overwrite && run_dir.as_deref() == Some("r"));
        let got: Vec<_> = ov
            .iter()
            .map(|o| (o.key.as_str(), o.value.clone(), o.origin.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("lr", toml::Value::Float(2e-5), "--lr"),
                ("batch_size", toml::Value::Integer(16), "--batch-size"),
                ("model", toml::Value::String("m".into()), "--model"),
            ]
        );
    }

    /// `--threads` after a recipe flag is the global flag (clap takes it only before the first
    /// recipe flag: it was refused as a recipe key, "unknown field 'threads'").
    #[test]
    fn threads_after_a_recipe_flag_is_the_global_flag() {
        let now = tch::get_num_threads().to_string();
        let ov = overrides(&["--lr", "2e-5", "--threads", &now]).unwrap();
        assert_eq!(
            ov.iter().map(|o| o.key.as_str()).collect::<Vec<_>>(),
            ["lr"]
        );
        let e = overrides(&["--lr", "2e-5", "--threads", "0"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--threads must be at least 1"), "{e}");
        let e = overrides(&["--threads=two"]).unwrap_err().to_string();
        assert!(e.contains("--threads: 'two' is not a whole number"), "{e}");
    }

    #[test]
    fn a_bare_word_or_a_missing_value_is_refused() {
        let e = overrides(&["lr", "1"]).unwrap_err().to_string();
        assert!(e.contains("expected a --key flag, got 'lr'"), "{e}");
        let e = overrides(&["--lr"]).unwrap_err().to_string();
        assert!(e.contains("--lr needs a value"), "{e}");
    }
}
