//! The typed bodies write the JSON the server's `json!` literals wrote before them: the same
//! keys, the same values (float32 numbers as the `f64` of the same value) and the same
//! optional keys present or absent.

use serde_json::{json, to_string, to_value};

use super::*;

#[test]
fn floats_are_written_as_the_f64_of_each_f32() {
    let v = vec![0.1f32, -1.0 / 3.0, 1e-8, f32::NAN];
    // `json!` of a float32 vector widened each value; so does the wire form
    assert_eq!(
        to_string(&Wire::Floats(v.clone())).unwrap(),
        json!(v).to_string()
    );
    assert_eq!(
        to_string(&Wire::Floats(vec![0.1])).unwrap(),
        "[0.10000000149011612]"
    );
    let hit = Hit {
        id: "d1".into(),
        score: f64::from(0.7f32),
        payload: None,
    };
    assert_eq!(
        to_value(&hit).unwrap(),
        json!({"id": "d1", "score": 0.7f32})
    );
}

#[test]
fn embeddings_keep_their_optional_keys() {
    let mut one = Embedding::new(3);
    one.embedding = Some(Wire::Signed(vec![-127, 5]));
    one.scale = Some(f64::from(0.25f32));
    let mut several = Embedding::new(0);
    several.embeddings = Some(ByName(vec![
        (Encoding::Ubinary, Wire::Unsigned(vec![200])),
        (Encoding::Base64, Wire::Text("AAAA".into())),
    ]));
    let list = EmbeddingList::new(vec![one, several], "tiny", 7);
    assert_eq!(
        to_value(&list).unwrap(),
        json!({
            "object": "list",
            "data": [
                {"object": "embedding", "index": 3, "embedding": [-127, 5], "scale": 0.25},
                {"object": "embedding", "index": 0, "embeddings": {"ubinary": [200], "base64": "AAAA"}},
            ],
            "model": "tiny",
            "usage": {"prompt_tokens": 7, "total_tokens": 7},
        })
    );
    // several forms are keyed in the order asked
    let text = to_string(&list.data[1]).unwrap();
    assert!(text.find("ubinary") < text.find("base64"), "{text}");
}

#[test]
fn raw_metadata_models_and_health() {
    let row = |scale| RawRow {
        index: 1,
        embed_dtype: "int8",
        endianness: "little",
        start: 4,
        end: 8,
        shape: [4],
        scale,
    };
    assert_eq!(
        to_value(RawMeta::new(vec![row(Some(0.5)), row(None)], "m", 2)).unwrap(),
        json!({"object": "list", "model": "m", "usage": {"prompt_tokens": 2, "total_tokens": 2}, "data": [
            {"index": 1, "embed_dtype": "int8", "endianness": "little", "start": 4, "end": 8, "shape": [4], "scale": 0.5},
            {"index": 1, "embed_dtype": "int8", "endianness": "little", "start": 4, "end": 8, "shape": [4]},
        ]})
    );
    let model = Model {
        id: "m".into(),
        object: "model",
        created: 0,
        owned_by: "nest",
        dimensions: vec![8, 32],
        layers: vec![2],
        max_dimensions: 32,
        max_layers: 2,
        allow_any_point: false,
        adaptor: None,
        dtype: "float32",
        dtype_reason: "asked".into(),
        encodings: Encoding::names(),
    };
    assert_eq!(
        to_value(ModelList::new(vec![model])).unwrap(),
        json!({"object": "list", "data": [{
            "id": "m", "object": "model", "created": 0, "owned_by": "nest",
            "dimensions": [8, 32], "layers": [2], "max_dimensions": 32, "max_layers": 2,
            "allow_any_point": false, "adaptor": null, "dtype": "float32",
            "dtype_reason": "asked", "encodings": Encoding::names(),
        }]})
    );
    assert_eq!(to_value(Health::OK).unwrap(), json!({"status": "ok"}));
}

#[test]
fn search_documents_and_errors() {
    let found = SearchList {
        object: "list",
        funnel: "float32:32".into(),
        data: vec![QueryHits {
            object: "search_result",
            index: 0,
            query: "cat".into(),
            hits: vec![Hit {
                id: "d1".into(),
                score: 0.5,
                payload: Some(json!({"lang": "fr"})),
            }],
        }],
    };
    assert_eq!(
        to_value(&found).unwrap(),
        json!({"object": "list", "funnel": "float32:32", "data": [{"object": "search_result",
            "index": 0, "query": "cat", "hits": [{"id": "d1", "score": 0.5, "payload": {"lang": "fr"}}]}]})
    );
    let added = Added {
        object: "documents",
        added: vec!["a".into()],
        replaced: vec!["b".into()],
        existing: vec![],
        count: 9,
    };
    assert_eq!(
        to_value(&added).unwrap(),
        json!({"object": "documents", "added": ["a"], "replaced": ["b"], "existing": [], "count": 9})
    );
    let deleted = Deleted {
        object: "documents",
        deleted: vec!["a".into()],
        missing: vec!["z".into()],
        count: 8,
    };
    assert_eq!(
        to_value(&deleted).unwrap(),
        json!({"object": "documents", "deleted": ["a"], "missing": ["z"], "count": 8})
    );
    let e = ErrorBody {
        error: ErrorDetail {
            message: "no".into(),
            kind: "invalid_request_error",
            param: None,
            code: "invalid_value",
        },
    };
    assert_eq!(
        to_value(&e).unwrap(),
        json!({"error": {"message": "no", "type": "invalid_request_error", "param": null, "code": "invalid_value"}})
    );
}
