//! kubelet's plugin watcher dials a registration socket with grpc-go and a bare path as target,
//! so every request it sends carries the socket path as `:authority`
//! (`/var/lib/kubelet/plugins_registry/topolvm.io-reg.sock`). h2, under tonic, refuses that as a
//! malformed authority and resets the stream: registration would never happen. This module sits
//! between the socket and the tonic server: it passes the client's HTTP/2 frames through, except
//! header blocks, which it decodes (HPACK, with the connection's own table), gives an authority
//! h2 accepts (`localhost`, what grpc-go itself sends for `unix://` targets) when theirs is not a
//! valid one, and re-encodes. The server's frames go back untouched.

use fluke_hpack::{Decoder, Encoder};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types and flags (RFC 9113 §6).
pub mod frame {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const CONTINUATION: u8 = 0x9;
    /// END_STREAM on DATA/HEADERS; ACK on SETTINGS/PING.
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

use frame::{CONTINUATION, END_HEADERS, END_STREAM, HEADERS, PADDED, PRIORITY};
/// The smallest SETTINGS_MAX_FRAME_SIZE a peer may set: re-encoded blocks are cut to it.
const MAX_FRAME: usize = 16_384;
/// Refuse header blocks larger than this (kubelet's are a few hundred bytes).
const MAX_BLOCK: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ShimError {
    #[error("reading from or writing to the connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("not an HTTP/2 connection: the client preface is missing")]
    Preface,
    #[error("malformed HTTP/2 frame: {0}")]
    Frame(&'static str),
    #[error("header block does not decode (HPACK): {0:?}")]
    Hpack(fluke_hpack::decoder::DecoderError),
}

/// One frame's header (RFC 9113 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHead {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl FrameHead {
    pub fn parse(b: &[u8; 9]) -> FrameHead {
        FrameHead {
            len: (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]),
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }

    pub fn bytes(&self) -> [u8; 9] {
        let l = self.len;
        let s = self.stream.to_be_bytes();
        [
            (l >> 16) as u8,
            (l >> 8) as u8,
            l as u8,
            self.kind,
            self.flags,
            s[0],
            s[1],
            s[2],
            s[3],
        ]
    }
}

/// The header block fragment of a HEADERS payload: padding and priority fields removed.
pub fn headers_fragment(flags: u8, payload: &[u8]) -> Result<&[u8], ShimError> {
    let mut p = payload;
    let mut pad = 0usize;
    if flags & PADDED != 0 {
        let (&n, rest) = p
            .split_first()
            .ok_or(ShimError::Frame("PADDED HEADERS without a pad length"))?;
        pad = usize::from(n);
        p = rest;
    }
    if flags & PRIORITY != 0 {
        p = p
            .get(5..)
            .ok_or(ShimError::Frame("PRIORITY HEADERS shorter than its fields"))?;
    }
    p.get(..p.len().saturating_sub(pad))
        .filter(|_| pad <= p.len())
        .ok_or(ShimError::Frame("padding longer than the HEADERS payload"))
}

/// Whether h2 takes `value` as an `:authority`.
fn acceptable_authority(value: &[u8]) -> bool {
    http::uri::Authority::try_from(value).is_ok()
}

/// One connection's header rewriting: the client's encoder table is mirrored by `decoder`; what
/// goes to the server is encoded by `encoder`, whose table the server mirrors.
pub struct Rewriter {
    decoder: Decoder<'static>,
    encoder: Encoder<'static>,
}

impl Default for Rewriter {
    fn default() -> Self {
        Rewriter {
            decoder: Decoder::new(),
            encoder: Encoder::new(),
        }
    }
}

impl Rewriter {
    /// A complete header block from the client → the block the server gets.
    pub fn rewrite(&mut self, block: &[u8]) -> Result<Vec<u8>, ShimError> {
        let mut headers = self.decoder.decode(block).map_err(ShimError::Hpack)?;
        for (name, value) in headers.iter_mut() {
            if name.as_slice() == b":authority" && !acceptable_authority(value) {
                *value = b"localhost".to_vec();
            }
        }
        Ok(self
            .encoder
            .encode(headers.iter().map(|(n, v)| (n.as_slice(), v.as_slice()))))
    }
}

/// `block` as a HEADERS frame (and CONTINUATIONs when it is longer than a frame may be).
pub fn header_frames(stream: u32, end_stream: bool, block: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(block.len() + 18);
    let chunks: Vec<&[u8]> = if block.is_empty() {
        vec![&[][..]]
    } else {
        block.chunks(MAX_FRAME).collect()
    };
    let last = chunks.len() - 1;
    for (i, chunk) in chunks.into_iter().enumerate() {
        let mut flags = if i == last { END_HEADERS } else { 0 };
        if i == 0 && end_stream {
            flags |= END_STREAM;
        }
        let head = FrameHead {
            len: chunk.len(),
            kind: if i == 0 { HEADERS } else { CONTINUATION },
            flags,
            stream,
        };
        out.extend_from_slice(&head.bytes());
        out.extend_from_slice(chunk);
    }
    out
}

/// The client's half of a connection: frames from `client` to `server`, header blocks
/// rewritten. Returns when the client closes.
pub async fn pump_client<R, W>(mut client: R, mut server: W) -> Result<(), ShimError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut preface = [0u8; 24];
    client.read_exact(&mut preface).await?;
    if &preface != PREFACE {
        return Err(ShimError::Preface);
    }
    server.write_all(&preface).await?;
    let mut rw = Rewriter::default();
    // A header block still waiting for its CONTINUATIONs: (stream, END_STREAM, fragment).
    let mut open: Option<(u32, bool, Vec<u8>)> = None;
    loop {
        let mut head = [0u8; 9];
        match client.read_exact(&mut head).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e.into()),
        }
        let h = FrameHead::parse(&head);
        let mut payload = vec![0u8; h.len];
        client.read_exact(&mut payload).await?;
        let block = match (h.kind, open.take()) {
            (HEADERS, None) => {
                let frag = headers_fragment(h.flags, &payload)?.to_vec();
                (h.stream, h.flags & END_STREAM != 0, frag)
            }
            (CONTINUATION, Some((stream, end, mut frag))) if stream == h.stream => {
                frag.extend_from_slice(&payload);
                (stream, end, frag)
            }
            (HEADERS | CONTINUATION, _) => {
                return Err(ShimError::Frame(
                    "header block interleaved with other frames",
                ));
            }
            (_, Some(_)) => {
                return Err(ShimError::Frame("frame inside an unfinished header block"));
            }
            _ => {
                server.write_all(&head).await?;
                server.write_all(&payload).await?;
                server.flush().await?;
                continue;
            }
        };
        if block.2.len() > MAX_BLOCK {
            return Err(ShimError::Frame("header block larger than 1 MiB"));
        }
        if h.flags & END_HEADERS == 0 {
            open = Some(block);
            continue;
        }
        let (stream, end_stream, frag) = block;
        let rewritten = rw.rewrite(&frag)?;
        server
            .write_all(&header_frames(stream, end_stream, &rewritten))
            .await?;
        server.flush().await?;
    }
    server.shutdown().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubelet_block(enc: &mut Encoder<'static>, path: &str) -> Vec<u8> {
        enc.encode([
            (&b":method"[..], &b"POST"[..]),
            (b":scheme", b"http"),
            (b":path", path.as_bytes()),
            (
                b":authority",
                b"/var/lib/kubelet/plugins_registry/topolvm.io-reg.sock",
            ),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
        ])
    }

    #[test]
    fn a_path_authority_becomes_localhost_and_everything_else_stays() {
        let mut client = Encoder::new();
        let mut rw = Rewriter::default();
        let mut server = Decoder::new();
        // Two requests on one connection: the second leans on the tables the first filled.
        for path in [
            "/pluginregistration.Registration/GetInfo",
            "/pluginregistration.Registration/NotifyRegistrationStatus",
        ] {
            let out = rw.rewrite(&kubelet_block(&mut client, path)).unwrap();
            let got = server.decode(&out).unwrap();
            let get = |n: &str| {
                got.iter()
                    .find(|(k, _)| k == n.as_bytes())
                    .map(|(_, v)| String::from_utf8_lossy(v).to_string())
            };
            assert_eq!(get(":authority").as_deref(), Some("localhost"));
            assert_eq!(get(":path").as_deref(), Some(path));
            assert_eq!(get("te").as_deref(), Some("trailers"));
            assert_eq!(got.len(), 6);
        }
        // A valid authority is left as it is.
        let block = client.encode([(&b":authority"[..], &b"localhost:50051"[..])]);
        let got = server.decode(&rw.rewrite(&block).unwrap()).unwrap();
        assert_eq!(got[0].1, b"localhost:50051");
    }

    #[test]
    fn huffman_coded_blocks_decode_as_grpc_go_sends_them() {
        // RFC 7541 C.4.1: a request whose strings are Huffman-coded, as grpc-go codes them.
        let block: Vec<u8> = [
            0x82, 0x86, 0x84, 0x41, 0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab,
            0x90, 0xf4, 0xff,
        ]
        .to_vec();
        let mut rw = Rewriter::default();
        let got = Decoder::new().decode(&rw.rewrite(&block).unwrap()).unwrap();
        assert_eq!(
            got[3],
            (b":authority".to_vec(), b"www.example.com".to_vec())
        );
        assert_eq!(got[2], (b":path".to_vec(), b"/".to_vec()));
        // Garbage is an error, not a guess.
        assert!(rw.rewrite(&[0xff, 0xff, 0xff, 0xff]).is_err());
    }

    #[test]
    fn frames_round_trip_and_headers_fields_are_stripped() {
        let h = FrameHead {
            len: 70_000,
            kind: HEADERS,
            flags: END_HEADERS | END_STREAM,
            stream: 0x7fff_fff1,
        };
        assert_eq!(FrameHead::parse(&h.bytes()), h);
        // PADDED (2 bytes of padding) and PRIORITY (5 bytes) around "abc".
        let payload = [2, 0, 0, 0, 1, 16, b'a', b'b', b'c', 0, 0];
        assert_eq!(
            headers_fragment(PADDED | PRIORITY, &payload).unwrap(),
            b"abc"
        );
        assert!(headers_fragment(PADDED, &[9, 1]).is_err());
        assert!(headers_fragment(PRIORITY, &[1, 2]).is_err());
        assert!(headers_fragment(PADDED, &[]).is_err());
        // A long block is cut into HEADERS + CONTINUATION, END_STREAM on the first only.
        let frames = header_frames(1, true, &vec![7u8; MAX_FRAME + 10]);
        let first = FrameHead::parse(frames[..9].try_into().unwrap());
        assert_eq!(
            (first.kind, first.flags, first.len),
            (HEADERS, END_STREAM, MAX_FRAME)
        );
        let at = 9 + MAX_FRAME;
        let second = FrameHead::parse(frames[at..at + 9].try_into().unwrap());
        assert_eq!(
            (second.kind, second.flags, second.len),
            (CONTINUATION, END_HEADERS, 10)
        );
    }
}
