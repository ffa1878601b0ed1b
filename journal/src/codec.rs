//! The one place that knows the byte format: bincode 2 (pinned config) inside a frame
//! `[format version u8][crc32c u32 BE][len u32 BE][payload]`, CRC over version, len and payload.
//! Decoding always runs with a size limit so a corrupt length cannot allocate unbounded memory.

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use crate::error::DecodeError;
use crate::error::JournalError;
use crate::record::Record;

/// Current on-disk format version, written in every frame and in the journal meta.
/// 2: intents and outcomes carry `regarding`. 3: intents carry `args`, outcomes a typed
/// report ([`Done`](crate::Done)), and the never-written `observed` kind is gone. 4: same
/// records as 3; the journal keeps an object index from `Mobject_index_from` on, which an
/// older release would not maintain, so it must refuse the journal. Frames of
/// every earlier version still decode (`legacy`), so a journal written by an older release
/// opens, verifies and replays.
pub const FORMAT_VERSION: u8 = 4;

/// The oldest format this release reads.
pub const OLDEST_READABLE_FORMAT: u8 = 1;

/// Largest payload accepted on decode (also the bincode decode limit).
pub const MAX_PAYLOAD: usize = 16 << 20;

const HEADER: usize = 1 + 4 + 4;

fn config() -> bincode::config::Configuration<
    bincode::config::LittleEndian,
    bincode::config::Varint,
    bincode::config::Limit<MAX_PAYLOAD>,
> {
    bincode::config::standard().with_limit::<MAX_PAYLOAD>()
}

fn crc(version: u8, len: [u8; 4], payload: &[u8]) -> u32 {
    let head = crc32c::crc32c(&[version, len[0], len[1], len[2], len[3]]);
    crc32c::crc32c_append(head, payload)
}

/// Serialize with the pinned bincode config (unframed; used for projection state).
pub fn encode_value<T: Serialize>(what: &'static str, value: &T) -> Result<Vec<u8>, JournalError> {
    let bytes =
        bincode::serde::encode_to_vec(value, config()).map_err(|e| JournalError::Encode {
            what,
            reason: e.to_string(),
        })?;
    if bytes.len() > MAX_PAYLOAD {
        return Err(JournalError::Encode {
            what,
            reason: format!("{} bytes exceeds the {MAX_PAYLOAD}-byte limit", bytes.len()),
        });
    }
    Ok(bytes)
}

/// Deserialize with the size limit; trailing bytes are an error (they mean a wrong type or a torn value).
pub fn decode_value<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    let (value, used) =
        bincode::serde::decode_from_slice::<T, _>(bytes, config()).map_err(DecodeError::Payload)?;
    if used != bytes.len() {
        return Err(DecodeError::TrailingBytes(bytes.len() - used));
    }
    Ok(value)
}

/// Wrap a payload in the checksummed frame.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    // encode_value enforces MAX_PAYLOAD (< u32::MAX), so the cast cannot truncate.
    let len = (payload.len() as u32).to_be_bytes();
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.push(FORMAT_VERSION);
    out.extend_from_slice(&crc(FORMAT_VERSION, len, payload).to_be_bytes());
    out.extend_from_slice(&len);
    out.extend_from_slice(payload);
    out
}

/// Check a frame and return its format version and payload, or why it is bad.
pub fn unframe(bytes: &[u8]) -> Result<(u8, &[u8]), DecodeError> {
    let Some((head, payload)) = bytes.split_at_checked(HEADER) else {
        return Err(DecodeError::FrameTooShort {
            len: bytes.len(),
            header: HEADER,
        });
    };
    let version = head[0];
    let stored_crc = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    let len_bytes = [head[5], head[6], head[7], head[8]];
    let len = u32::from_be_bytes(len_bytes) as usize;
    if version > FORMAT_VERSION {
        return Err(DecodeError::NewerVersion {
            version,
            supported: FORMAT_VERSION,
        });
    }
    if version < OLDEST_READABLE_FORMAT {
        return Err(DecodeError::UnknownVersion { version });
    }
    if len != payload.len() {
        return Err(DecodeError::TornFrame {
            len,
            stored: payload.len(),
        });
    }
    let actual = crc(version, len_bytes, payload);
    if actual != stored_crc {
        return Err(DecodeError::Checksum {
            stored: stored_crc,
            computed: actual,
        });
    }
    Ok((version, payload))
}

pub fn encode_record(record: &Record) -> Result<Vec<u8>, JournalError> {
    Ok(frame(&encode_value("record", record)?))
}

pub fn decode_record(bytes: &[u8]) -> Result<Record, DecodeError> {
    match unframe(bytes)? {
        (1, payload) => decode_value::<crate::legacy::RecordV1>(payload)?.try_into(),
        (2, payload) => decode_value::<crate::legacy::RecordV2>(payload)?.try_into(),
        (_, payload) => decode_value(payload),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::*;
    use proptest::prelude::*;

    fn s() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9 /._-]{0,12}"
    }

    fn object() -> impl Strategy<Value = ObjectRef> {
        (s(), s(), s(), s(), any::<i64>()).prop_map(|(kind, namespace, name, uid, generation)| {
            ObjectRef {
                kind,
                namespace,
                name,
                uid,
                generation,
            }
        })
    }

    fn result() -> impl Strategy<Value = OutcomeResult> {
        prop_oneof![
            (
                proptest::option::of(s()),
                proptest::option::of((any::<bool>(), s(), s())),
                proptest::option::of(0usize..5),
                proptest::option::of(s()),
                proptest::option::of(any::<u32>()),
                any::<bool>(),
                proptest::collection::btree_map(s(), s(), 0..4)
            )
                .prop_map(
                    |(resource_version, event, replay, summary, applied, quiet, facts)| {
                        OutcomeResult::Ok(Done {
                            resource_version,
                            event: event.map(|(warning, reason, note)| EventNote {
                                warning,
                                reason,
                                note,
                            }),
                            replay: replay.map(|i| {
                                [
                                    Replayed::AlreadyDone,
                                    Replayed::Redone,
                                    Replayed::NotDone,
                                    Replayed::Superseded,
                                    Replayed::Rechecked,
                                ][i]
                            }),
                            summary,
                            applied,
                            quiet,
                            facts,
                        })
                    }
                ),
            (s(), s(), any::<bool>()).prop_map(|(reason, message, retryable)| OutcomeResult::Err {
                reason,
                message,
                retryable
            }),
        ]
    }

    pub(crate) fn body() -> impl Strategy<Value = Body> {
        prop_oneof![
            (
                s(),
                object(),
                s(),
                proptest::collection::vec(s(), 0..4),
                s(),
                s(),
                any::<u64>()
            )
                .prop_map(
                    |(unit, object, action, args, desired_digest, idempotency_key, lease_epoch)| {
                        Body::Intent(Intent {
                            unit,
                            regarding: vec![object.clone()],
                            object,
                            action,
                            args,
                            desired_digest,
                            idempotency_key,
                            lease_epoch,
                        })
                    }
                ),
            (
                any::<u64>(),
                s(),
                object(),
                result(),
                any::<u64>(),
                proptest::collection::vec(object(), 0..3)
            )
                .prop_map(
                    |(intent_seq, unit, object, result, duration_ms, regarding)| {
                        Body::Outcome(Outcome {
                            intent_seq,
                            unit,
                            object,
                            result,
                            duration_ms,
                            regarding,
                        })
                    }
                ),
            (
                s(),
                proptest::option::of(object()),
                any::<bool>(),
                s(),
                any::<u64>(),
                any::<u64>(),
                s()
            )
                .prop_map(
                    |(unit, object, ev, dedupe_key, source_seq, count, summary)| Body::Published(
                        Published {
                            unit,
                            object,
                            kind: if ev {
                                PublishKind::Event
                            } else {
                                PublishKind::Status
                            },
                            dedupe_key,
                            source_seq,
                            count,
                            summary
                        }
                    )
                ),
            (
                s(),
                any::<u64>(),
                proptest::collection::vec(any::<u8>(), 0..64)
            )
                .prop_map(|(projection, upto_seq, state)| Body::Snapshot(Snapshot {
                    projection,
                    upto_seq,
                    state
                })),
        ]
    }

    proptest! {
        #[test]
        fn round_trip_every_kind(seq: u64, at_ms: u64, t: [u8; 16], sp: [u8; 8], body in body()) {
            let rec = Record { seq, at_ms, trace: Trace { trace_id: TraceId(t), span_id: SpanId(sp) }, body };
            let bytes = encode_record(&rec).unwrap();
            prop_assert_eq!(decode_record(&bytes).unwrap(), rec);
        }

        #[test]
        fn any_single_byte_flip_is_detected(body in body(), pos: prop::sample::Index, bit in 0u8..8) {
            let rec = Record { seq: 7, at_ms: 1, trace: Trace::default(), body };
            let mut bytes = encode_record(&rec).unwrap();
            let i = pos.index(bytes.len());
            bytes[i] ^= 1 << bit;
            prop_assert!(decode_record(&bytes).is_err());
        }

        #[test]
        fn truncation_is_detected(body in body(), cut: prop::sample::Index) {
            let rec = Record { seq: 7, at_ms: 1, trace: Trace::default(), body };
            let bytes = encode_record(&rec).unwrap();
            let n = cut.index(bytes.len());
            prop_assert!(decode_record(&bytes[..n]).is_err());
        }
    }

    /// A format-1 record (before `regarding`) still decodes, with nothing regarded.
    #[test]
    fn format_1_frames_decode_into_the_current_types() {
        #[derive(serde::Serialize)]
        struct IntentV1<'a>(&'a str, ObjectRef, &'a str, &'a str, &'a str, u64);
        #[derive(serde::Serialize)]
        enum BodyV1<'a> {
            #[allow(dead_code)]
            Observed(u8),
            Intent(IntentV1<'a>),
        }
        #[derive(serde::Serialize)]
        struct RecordV1<'a>(u64, u64, Trace, BodyV1<'a>);
        let obj = ObjectRef {
            kind: "LVMVolumeGroup".into(),
            name: "vg1".into(),
            uid: "u1".into(),
            ..Default::default()
        };
        let old = RecordV1(
            3,
            9,
            Trace::default(),
            BodyV1::Intent(IntentV1("vg/vg1", obj.clone(), "vgcreate", "argv", "k", 0)),
        );
        let payload = encode_value("record", &old).unwrap();
        let mut bytes = frame(&payload);
        // Re-frame as version 1 (frame() writes the current version).
        bytes[0] = 1;
        let len = [bytes[5], bytes[6], bytes[7], bytes[8]];
        bytes[1..5].copy_from_slice(&crc(1, len, &payload).to_be_bytes());
        let rec = decode_record(&bytes).unwrap();
        assert_eq!(rec.seq, 3);
        match rec.body {
            Body::Intent(i) => {
                assert_eq!((i.unit.as_str(), i.action.as_str()), ("vg/vg1", "vgcreate"));
                assert_eq!(i.object, obj);
                assert!(i.regarding.is_empty());
            }
            other => panic!("{other:?}"),
        }
        bytes[0] = 0;
        assert!(
            decode_record(&bytes).is_err(),
            "version 0 was never written"
        );
    }

    #[test]
    fn newer_frame_version_is_named() {
        let mut bytes = frame(b"x");
        bytes[0] = FORMAT_VERSION + 1;
        let err = unframe(&bytes).unwrap_err();
        assert!(
            matches!(err, DecodeError::NewerVersion { version, .. } if version == FORMAT_VERSION + 1),
            "{err}"
        );
        assert!(err.to_string().contains("newer"), "{err}");
    }
}
