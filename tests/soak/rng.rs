//! Seeded randomness (the test kit's, shared with the CSI soak).

pub(crate) use lvms_testkit::rng::Rng;
