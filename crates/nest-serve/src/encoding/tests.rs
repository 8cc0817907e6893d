//! The wire forms against hand-made cases and against the numpy / sentence-transformers
//! reference fixture.

use super::*;
use serde_json::Value;

/// A wire form as the JSON a client reads.
fn json<T: serde::de::DeserializeOwned>(w: &Wire) -> T {
    serde_json::from_value(serde_json::to_value(w).unwrap()).unwrap()
}

#[test]
fn codes_offsets_and_bits() {
    let mut v = [0.5f32, -0.25, 0.0, 0.125, -0.5, 0.75, 0.1, -0.1, 0.2];
    nest_core::vector::l2_normalize(&mut v);
    let e = encode(
        &v,
        &[
            Encoding::Int8,
            Encoding::Uint8,
            Encoding::Binary,
            Encoding::Ubinary,
        ],
    );
    let (q, s) = int8(&v);
    assert_eq!(e.scale, Some(s));
    assert!((s - v[5] / 127.0).abs() < 1e-9);
    assert_eq!(q[5], 127);
    assert_eq!(q[2], 0);
    let u: Vec<u8> = json(&e.values[1].1);
    assert!(u.iter().zip(&q).all(|(&u, &c)| u as i16 == c as i16 + 128));
    // bits: 1 0 0 1 0 1 1 0 | 1 (padded)
    let ub: Vec<u8> = json(&e.values[3].1);
    assert_eq!(ub, vec![0b1001_0110, 0b1000_0000]);
    let b: Vec<i8> = json(&e.values[2].1);
    assert_eq!(
        b,
        [150i16 - 128, 0]
            .iter()
            .map(|&x| x as i8)
            .collect::<Vec<_>>()
    );
}

#[test]
fn packed_rows_and_their_metadata() {
    let rows = vec![vec![0.6f32, -0.8], vec![0.0, 1.0]];
    let (f, meta) = raw(&rows, EmbedDtype::Float32, Endianness::Little);
    assert_eq!(f.len(), 16);
    assert_eq!(&f[4..8], &(-0.8f32).to_le_bytes());
    assert_eq!((meta[1].start, meta[1].end, meta[1].shape), (8, 16, [2]));
    let (big, _) = raw(&rows, EmbedDtype::Float32, Endianness::Big);
    assert_eq!(&big[4..8], &(-0.8f32).to_be_bytes());
    let (h, _) = raw(&rows, EmbedDtype::Float16, Endianness::Little);
    assert_eq!(&h[2..4], &half::f16::from_f32(-0.8).to_le_bytes());
    let (q, meta) = raw(&rows, EmbedDtype::Int8, Endianness::Little);
    assert_eq!(q.len(), 4);
    assert_eq!(q[1] as i8, -127);
    assert_eq!(meta[0].scale.unwrap() as f32, int8(&rows[0]).1);
    assert_eq!(
        raw(&rows, EmbedDtype::Ubinary, Endianness::Big).0,
        vec![0b1000_0000, 0b0100_0000]
    );
    assert_eq!(
        raw(&rows, EmbedDtype::Binary, Endianness::Little).0,
        vec![0, 0b1100_0000]
    );
    let (b, s) = packed(&rows[0], EmbedDtype::Uint8, Endianness::Little);
    assert_eq!((b.len(), s.is_some()), (4, true));
}

#[test]
fn requests_name_the_field() {
    let s = |x: &str| Value::String(x.into());
    let n = Value::Null;
    let parse = |f: &Value, t: &Value, d: &Value, o: &Value| Output::parse(f, t, d, o);
    assert_eq!(parse(&n, &n, &n, &n).unwrap(), Output::One(Encoding::Float));
    assert_eq!(
        parse(&s("ubinary"), &n, &n, &n).unwrap(),
        Output::One(Encoding::Ubinary)
    );
    assert_eq!(
        parse(&s("base64"), &n, &n, &n).unwrap(),
        Output::One(Encoding::Base64)
    );
    assert_eq!(
        parse(&s("base64"), &n, &s("int8"), &n).unwrap(),
        Output::Packed(EmbedDtype::Int8, Endianness::Little)
    );
    assert_eq!(
        parse(&s("bytes"), &n, &s("int8"), &s("big")).unwrap(),
        Output::Raw {
            dtype: EmbedDtype::Int8,
            order: Endianness::Big,
            header: true
        }
    );
    let types = serde_json::json!(["int8", "float", "int8"]);
    assert_eq!(
        parse(&n, &types, &n, &n).unwrap(),
        Output::Several(vec![Encoding::Int8, Encoding::Float])
    );
    for (f, t, d, needle) in [
        (s("int4"), n.clone(), n.clone(), "encoding_format"),
        (s("int8"), types.clone(), n.clone(), "not both"),
        (
            n.clone(),
            serde_json::json!([]),
            n.clone(),
            "embedding_types",
        ),
        (
            n.clone(),
            serde_json::json!(["x"]),
            n.clone(),
            "embedding_types[0]",
        ),
        (s("float"), n.clone(), s("int8"), "embed_dtype"),
        (s("bytes"), n.clone(), s("fp4"), "embed_dtype"),
        (s("bytes_only"), n.clone(), s("uint8"), "scales"),
    ] {
        let e = parse(&f, &t, &d, &n).unwrap_err().to_string();
        assert!(e.contains(needle), "{e}");
    }
    let e = parse(&s("bytes"), &n, &n, &s("middle"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("endianness"), "{e}");
}

/// Against `tests/fixtures/quantize_encodings.json` (`tests/reference/quantize_encodings.py`:
/// numpy packings, and sentence-transformers' `quantize_embeddings` called on the same
/// vectors for `binary` / `ubinary`). Normalised vectors within 1e-7 (float sums in another
/// order), the int8 scale within 2 ulp, every code, bit and base64 string exact.
mod reference {
    use super::*;

    fn ints(v: &Value) -> Vec<i64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect()
    }

    #[test]
    fn every_encoding_matches_numpy_and_sentence_transformers() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/quantize_encodings.json"
        );
        let fx: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut checked = 0;
        for set in ["dim20", "dim16"] {
            let inputs = &fx[set]["inputs"];
            for case in fx[set]["cases"].as_array().unwrap() {
                let dim = case["dim"].as_u64().unwrap() as usize;
                for (i, row) in case["rows"].as_array().unwrap().iter().enumerate() {
                    let x: Vec<f32> = inputs[i]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_f64().unwrap() as f32)
                        .collect();
                    let v = nest_core::vector::prefix_normalized(&x, dim);
                    let want: Vec<f32> = row["normalized"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_f64().unwrap() as f32)
                        .collect();
                    assert!(
                        v.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 1e-7),
                        "{set} dim {dim} row {i}"
                    );
                    // encode the reference's vector, so that every byte can be compared
                    let e = encode(&want, &Encoding::ALL);
                    let got =
                        |k: Encoding| json(&e.values.iter().find(|(n, _)| *n == k).unwrap().1);
                    assert_eq!(got(Encoding::Base64), row["base64"], "{set} {dim} {i}");
                    assert_eq!(
                        ints(&got(Encoding::Int8)),
                        ints(&row["nest_int8"]),
                        "{set} {dim} {i}"
                    );
                    assert_eq!(ints(&got(Encoding::Uint8)), ints(&row["nest_uint8"]));
                    assert_eq!(ints(&got(Encoding::Ubinary)), ints(&row["ubinary"]));
                    assert_eq!(ints(&got(Encoding::Binary)), ints(&row["binary"]));
                    // the index prepares a query by normalising it again: the scale may move by
                    // an ulp of the (already unit) vector's re-normalisation
                    let (s, want_s) = (
                        e.scale.unwrap(),
                        row["nest_int8_scale"].as_f64().unwrap() as f32,
                    );
                    assert!(
                        (s - want_s).abs() <= 2.0 * f32::EPSILON * want_s,
                        "{s} vs {want_s}"
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked >= 15, "{checked} rows checked");
    }
}
