//! The parser's tests: every input form, bad bodies named, and properties.

use super::*;
use proptest::prelude::*;

/// The server's default: a field the endpoint does not read is refused.
fn parse(body: &[u8]) -> Result<EmbeddingRequest> {
    super::parse(body, UnknownFields::Reject)
}

#[test]
fn every_input_form() {
    let r = parse(
        br#"{"input":"hi","model":"m","dimensions":64,"encoding_format":"base64","user":"u"}"#,
    )
    .unwrap();
    assert_eq!(r.inputs, Inputs::Texts(vec!["hi".into()]));
    assert_eq!(
        (r.dimensions, r.output),
        (Some(64), Output::One(Encoding::Base64))
    );
    assert_eq!(parse(br#"{"input":["a","b"]}"#).unwrap().inputs.len(), 2);
    assert_eq!(
        parse(br#"{"input":[101,7,102]}"#).unwrap().inputs,
        Inputs::Tokens(vec![vec![101, 7, 102]])
    );
    assert_eq!(
        parse(br#"{"input":[[1,2],[3]],"layers":3}"#)
            .unwrap()
            .layers,
        Some(3)
    );
}

#[test]
fn bad_bodies_name_the_field() {
    for (body, needle) in [
        (&b"\x7b"[..], "not valid JSON"),
        (
            b"{\"input\":\"caf\xe9\"}",
            "the body is not UTF-8 (byte 13 is not)",
        ),
        (b"[1]", "JSON object"),
        (
            br#"{"input":"\ud800"}"#,
            "hex escape at line 1 column 17 (a \\uD800-\\uDFFF escape is half of a pair",
        ),
        (
            br#"{"input":"a","truncate":1}"#,
            "'truncate' must be true or false",
        ),
        (b"{}", "'input' is required"),
        (br#"{"input":[]}"#, "empty array"),
        (br#"{"input":["a",1]}"#, "input[1]"),
        (br#"{"input":[1,-2]}"#, "input[1]"),
        (br#"{"input":[[1],[]]}"#, "input[1]"),
        (br#"{"input":{"a":1}}"#, "an object"),
        (br#"{"input":"a","dimensions":0}"#, "dimensions"),
        (br#"{"input":"a","dimensions":"64"}"#, "dimensions"),
        (br#"{"input":"a","layers":2.5}"#, "layers"),
        (
            br#"{"input":"a","encoding_format":"int4"}"#,
            "encoding_format",
        ),
        (br#"{"input":"a","model":5}"#, "model"),
        (br#"{"input":"a","user":5}"#, "user"),
    ] {
        let e = parse(body).unwrap_err();
        assert!(matches!(e, Error::BadRequest { .. }), "{body:?}");
        assert!(
            e.to_string().contains(needle),
            "{:?}: {e}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn every_documented_field_is_read() {
    let body = br#"{"input":["a"],"model":"m","dimensions":8,"layers":1,"encoding_format":"base64","user":"u","prompt_name":"query","prompt":"q: "}"#;
    let r = parse(body).unwrap();
    assert_eq!((r.dimensions, r.layers), (Some(8), Some(1)));
    assert_eq!(r.prompt_name.as_deref(), Some("query"));
    assert_eq!(r.prompt.as_deref(), Some("q: "));
    assert_eq!(r.model.as_deref(), Some("m"));
    assert!(matches!(r.output, Output::One(Encoding::Base64)));
    // a wrong type in any documented field but `user` is named in the error
    for f in FIELDS.iter().filter(|f| f.name != "input") {
        let body = format!(r#"{{"input":"a","{}":[1]}}"#, f.name);
        let e = parse(body.as_bytes()).unwrap_err().to_string();
        assert!(e.contains(f.name), "{}: {e}", f.name);
    }
}

#[test]
fn a_field_no_endpoint_reads_is_refused_unless_ignored() {
    let body = br#"{"input":"a","layer":3}"#;
    let e = parse(body).unwrap_err();
    assert!(matches!(e, Error::BadRequest { .. }));
    let m = e.to_string();
    assert!(
        m.starts_with("unrecognized request argument supplied: 'layer' (did you mean 'layers'?)"),
        "{m}"
    );
    assert!(
        m.contains("POST /v1/embeddings reads input, model, dimensions, layers"),
        "{m}"
    );
    let r = super::parse(body, UnknownFields::Ignore).unwrap();
    assert_eq!((r.layers, r.inputs.len()), (None, 1));
    // OpenAI's own fields and the wire forms of vLLM and Cohere are read, not refused
    let wire = r#""encoding_format":"base64","embed_dtype":"float16","endianness":"big""#;
    parse(format!(r#"{{"input":"a","user":"u",{wire}}}"#).as_bytes()).unwrap();
    parse(br#"{"input":"a","embedding_types":["float","int8"]}"#).unwrap();
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse(&b);
    }

    #[test]
    fn arbitrary_json_never_panics(s in r#"\{("(input|dimensions|layers|model|encoding_format|user)":(\[|\]|[0-9-]{1,3}|"[a-z]{0,3}"|null|true|,|\{\}){1,6},?){0,4}\}"#) {
        let _ = parse(s.as_bytes());
    }
}
