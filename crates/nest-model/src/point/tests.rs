//! The operating point's resolution: defaults, ranges, the trained-point policy, the keys
//! errors name.

use super::*;

fn meta(dims: &[usize], layers: &[usize], default_dim: Option<usize>) -> NestMeta {
    NestMeta {
        matryoshka_dims: dims.to_vec(),
        trained_layers: layers.to_vec(),
        default_dim,
        ..Default::default()
    }
}

#[test]
fn defaults_and_trained_points() {
    let o = Offer::from_meta(6, 384, &meta(&[64, 128], &[2, 4], None), None);
    assert_eq!(o.dims(), &[64, 128, 384]);
    assert_eq!(o.layers(), &[2, 4, 6]);
    let p = o
        .resolve(None, None, Keys::FLAGS, Policy::AnyInRange)
        .unwrap();
    assert_eq!(p, Point { layer: 6, dim: 384 });
    let slim = Offer::from_meta(6, 384, &meta(&[], &[], Some(128)), None);
    assert_eq!(
        slim.resolve(None, None, Keys::FLAGS, Policy::AnyInRange)
            .unwrap()
            .dim,
        128
    );
    let p = o
        .resolve(Some(3), Some(100), Keys::FLAGS, Policy::AnyInRange)
        .unwrap();
    assert_eq!(p, Point { layer: 3, dim: 100 });
}

#[test]
fn errors_name_the_key_used() {
    let o = Offer::from_meta(2, 32, &meta(&[8, 16], &[1], None), None);
    let e = o
        .resolve(Some(3), None, Keys::API, Policy::AnyInRange)
        .unwrap_err();
    assert_eq!(e.key, "layers");
    assert!(e.message.contains("2 layers"), "{e}");
    let e = o
        .resolve(None, Some(64), Keys::FLAGS, Policy::AnyInRange)
        .unwrap_err();
    assert_eq!(e.key, "--dim");
    assert!(e.message.contains("at most 32 dims"), "{e}");
    let trained = Policy::TrainedOnly { unlock: "ask" };
    let e = o.resolve(None, Some(12), Keys::API, trained).unwrap_err();
    assert!(
        e.message.contains("8, 16, 32") && e.message.contains("ask"),
        "{e}"
    );
    assert!(o.resolve(Some(1), Some(16), Keys::API, trained).is_ok());
    let e = o
        .resolve_grid(Some(vec![1, 0]), None, Keys::GRID_FLAGS)
        .unwrap_err();
    assert_eq!(e.key, "--layers");
}

#[test]
fn adaptor_dims_are_the_only_dims() {
    let o = Offer::from_meta(6, 384, &meta(&[64], &[], Some(64)), Some(vec![192, 96]));
    assert_eq!(o.dims(), &[96, 192]);
    assert_eq!(o.default_dim(), 192);
    let e = o
        .resolve(None, Some(100), Keys::FLAGS, Policy::AnyInRange)
        .unwrap_err();
    assert!(e.message.contains("96, 192"), "{e}");
    assert_eq!(
        o.resolve_grid(None, None, Keys::GRID_FLAGS).unwrap().1,
        vec![96, 192]
    );
}

#[test]
fn grid_defaults() {
    assert_eq!(default_dims(384), vec![16, 32, 64, 128, 256, 384]);
    assert_eq!(default_dims(32), vec![16, 32]);
    assert_eq!(default_dims(8), vec![8]);
    let o = Offer::from_meta(3, 32, &NestMeta::default(), None);
    assert_eq!(
        o.resolve_grid(None, None, Keys::GRID_FLAGS).unwrap(),
        (vec![1, 2, 3], vec![16, 32])
    );
}

#[test]
fn untrained_points_are_named_in_the_keys_used() {
    let o = Offer::from_meta(6, 384, &meta(&[64, 128], &[3], None), None);
    let at = |layer, dim| Point { layer, dim };
    assert_eq!(o.untrained(at(6, 384), Keys::FLAGS), None);
    assert_eq!(o.untrained(at(3, 64), Keys::FLAGS), None);
    let w = o.untrained(at(2, 64), Keys::FLAGS).unwrap();
    assert!(
        w.starts_with("--layer 2 is not a trained exit (trained: 3, 6): "),
        "{w}"
    );
    let w = o.untrained(at(2, 100), Keys::API).unwrap();
    assert!(
        w.contains("layers 2 is not a trained exit")
            && w.contains("dimensions 100 is not a trained dim (trained: 64, 128, 384)"),
        "{w}"
    );
    // a model with no training record: only its full point
    let plain = Offer::from_meta(6, 384, &NestMeta::default(), None);
    assert!(plain.untrained(at(6, 64), Keys::FLAGS).is_some());
}
