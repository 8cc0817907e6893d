//! The documents reader: layouts, ids, titles, payloads, errors and shares.

use super::*;

#[test]
fn a_stored_document_keeps_its_payload_and_adds_its_text_when_asked() {
    let d = |payload| Document {
        id: "1".into(),
        text: "a cat".into(),
        payload,
    };
    let with = serde_json::json!({"lang": "en"});
    assert_eq!(d(with.clone()).stored(false), with);
    let both = serde_json::json!({"lang": "en", "text": "a cat"});
    assert_eq!(d(with).stored(true), both);
    // plain text: no payload of its own
    assert_eq!(
        d(serde_json::Value::Null).stored(false),
        serde_json::Value::Null
    );
    let text = serde_json::json!({"text": "a cat"});
    assert_eq!(d(serde_json::Value::Null).stored(true), text);
}

#[test]
fn renumbered_shares_are_the_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("a.txt", "one\ntwo\n\nfour\nfive\nsix\n".to_string()),
        (
            "b.jsonl",
            (0..23)
                .map(|i| match i % 3 {
                    0 => format!("{{\"id\":\"x{i}\",\"text\":\"t{i}\",\"u\":{i}}}\n"),
                    1 => format!("{{\"text\":\"t{i}\"}}\n"),
                    _ => "\n".to_string(),
                })
                .collect(),
        ),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        let whole = read_documents(&p).unwrap();
        for shares in 1..6 {
            let (mut lines, mut records, mut all) = (0, 0, Vec::new());
            for k in 0..shares {
                let mut s = read_documents_share(&p, k, shares).unwrap();
                s.renumber(lines, records);
                (lines, records) = (lines + s.lines, records + s.records);
                all.extend(s.docs);
            }
            assert_eq!(all, whole, "{name}, {shares} shares");
        }
    }
}

#[test]
fn jsonl_ids_titles_payloads_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.jsonl");
    std::fs::write(
        &p,
        "{\"_id\":\"a\",\"title\":\"T\",\"text\":\"x\",\"url\":\"u\"}\n\n{\"id\":7,\"text\":\"y\"}\n{\"text\":\"z\"}\n",
    )
    .unwrap();
    let d = read_documents(&p).unwrap();
    assert_eq!(d.len(), 3);
    assert_eq!((d[0].id.as_str(), d[0].text.as_str()), ("a", "T x"));
    assert_eq!(d[0].payload["url"], "u");
    assert_eq!(d[1].id, "7");
    assert_eq!(d[2].id, "3");
    std::fs::write(
        &p,
        "{\"id\":\"a\",\"text\":\"x\"}\n{\"id\":\"a\",\"text\":\"y\"}\n",
    )
    .unwrap();
    let e = read_documents(&p).unwrap_err().to_string();
    assert!(
        e.contains("line 2: duplicate id 'a', first at line 1"),
        "{e}"
    );
    // an id that clashes with a record's number names both, and says which is a number
    std::fs::write(&p, "{\"id\":\"2\",\"text\":\"x\"}\n{\"text\":\"y\"}\n").unwrap();
    let e = read_documents(&p).unwrap_err().to_string();
    let want = "line 2: duplicate id '2' (a record without an id: its number stands in), \
                first at line 1";
    assert!(e.contains(want), "{e}");
    std::fs::write(&p, "{\"id\":\"a\",\"txt\":\"x\"}\n").unwrap();
    let e = read_documents(&p).unwrap_err().to_string();
    assert!(e.contains("line 1") && e.contains("text"), "{e}");
    // every bad line in one run (trial D U12: one a run), whitespace-only text among them
    let mut lines = vec!["{\"id\":\"ok\",\"text\":\"x\"}".to_string(), "nope".into()];
    lines.push("{\"id\":\"w\",\"text\":\" \\t \"}".into());
    lines.extend((0..12).map(|i| format!("{{\"id\":{i},\"txt\":\"x\"}}")));
    std::fs::write(&p, lines.join("\n")).unwrap();
    let e = read_documents(&p).unwrap_err().to_string();
    let want = "line 2: not valid JSON: expected ident at line 1 column 2; 13 more bad \
                line(s): 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 and 3 more";
    assert!(e.contains(want), "{e}");
    std::fs::write(&p, "{\"id\":\"w\",\"text\":\" \\t \"}\n").unwrap();
    let e = read_documents(&p).unwrap_err().to_string();
    assert!(e.contains("only whitespace"), "{e}");
}
