//! What kubelet's plugin watcher does with a node plugin's registration socket, for tests that
//! have no kubelet: GetInfo and NotifyRegistrationStatus sent exactly as kubelet sends them
//! (grpc-go dialled with a bare socket path, so each request's `:authority` is that path; no
//! Rust gRPC client can send that, so this one writes the HTTP/2 frames itself), and in between
//! what kubelet's CSI plugin handler does: NodeGetInfo on the endpoint the plugin named (over
//! `unix://`, authority `localhost`), the driver's entry in the CSINode with its topology keys,
//! and the topology labels on the Node.

use std::collections::BTreeMap;
use std::path::Path;

use fluke_hpack::{Decoder, Encoder};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::CSINode;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use lvms::csi::authority::{FrameHead, PREFACE, header_frames};
use lvms::csi::registration::proto::{InfoRequest, PluginInfo, RegistrationStatus};
use prost::Message;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use lvms::csi::authority::frame::{
    ACK, DATA, END_STREAM, GOAWAY, HEADERS, PING, RST_STREAM, SETTINGS,
};

/// One HTTP/2 connection to a plugin socket, as kubelet's grpc-go client makes it.
pub struct KubeletConn {
    io: UnixStream,
    /// What kubelet puts in `:authority`: the socket path it dialled.
    authority: String,
    encoder: Encoder<'static>,
    decoder: Decoder<'static>,
    next_stream: u32,
}

impl KubeletConn {
    pub async fn connect(socket: &Path) -> std::io::Result<KubeletConn> {
        let mut io = UnixStream::connect(socket).await?;
        io.write_all(PREFACE).await?;
        let settings = FrameHead {
            len: 0,
            kind: SETTINGS,
            flags: 0,
            stream: 0,
        };
        io.write_all(&settings.bytes()).await?;
        Ok(KubeletConn {
            io,
            authority: socket.display().to_string(),
            encoder: Encoder::new(),
            decoder: Decoder::new(),
            next_stream: 1,
        })
    }

    async fn frame(&mut self, head: FrameHead, payload: &[u8]) -> std::io::Result<()> {
        self.io.write_all(&head.bytes()).await?;
        self.io.write_all(payload).await
    }

    /// One unary call: `Err` names what the server did instead of answering (a reset stream,
    /// GOAWAY, a non-OK grpc-status).
    pub async fn unary(&mut self, path: &str, request: &[u8]) -> Result<Vec<u8>, String> {
        let stream = self.next_stream;
        self.next_stream += 2;
        let block = self.encoder.encode([
            (&b":method"[..], &b"POST"[..]),
            (b":scheme", b"http"),
            (b":path", path.as_bytes()),
            (b":authority", self.authority.as_bytes()),
            (b"content-type", b"application/grpc"),
            (b"user-agent", b"grpc-go/1.72.2"),
            (b"te", b"trailers"),
        ]);
        let io = |e: std::io::Error| e.to_string();
        self.io
            .write_all(&header_frames(stream, false, &block))
            .await
            .map_err(io)?;
        let mut msg = vec![0u8];
        msg.extend_from_slice(&u32::try_from(request.len()).unwrap_or(0).to_be_bytes());
        msg.extend_from_slice(request);
        let data = FrameHead {
            len: msg.len(),
            kind: DATA,
            flags: END_STREAM,
            stream,
        };
        self.frame(data, &msg).await.map_err(io)?;
        let mut body = Vec::new();
        let mut headers: BTreeMap<String, String> = BTreeMap::new();
        loop {
            let mut head = [0u8; 9];
            self.io.read_exact(&mut head).await.map_err(io)?;
            let h = FrameHead::parse(&head);
            let mut payload = vec![0u8; h.len];
            self.io.read_exact(&mut payload).await.map_err(io)?;
            match h.kind {
                SETTINGS if h.flags & ACK == 0 => {
                    let ack = FrameHead {
                        len: 0,
                        kind: SETTINGS,
                        flags: ACK,
                        stream: 0,
                    };
                    self.frame(ack, &[]).await.map_err(io)?;
                }
                PING if h.flags & ACK == 0 => {
                    let pong = FrameHead { flags: ACK, ..h };
                    self.frame(pong, &payload).await.map_err(io)?;
                }
                GOAWAY => return Err(format!("GOAWAY {:?}", payload.get(4..8))),
                RST_STREAM if h.stream == stream => {
                    return Err(format!(
                        "stream reset, HTTP/2 error code {:?} (1 = PROTOCOL_ERROR)",
                        payload
                            .get(..4)
                            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
                    ));
                }
                DATA if h.stream == stream => body.extend_from_slice(&payload),
                HEADERS if h.stream == stream => {
                    let frag = lvms::csi::authority::headers_fragment(h.flags, &payload)
                        .map_err(|e| e.to_string())?;
                    for (k, v) in self.decoder.decode(frag).map_err(|e| format!("{e:?}"))? {
                        headers.insert(
                            String::from_utf8_lossy(&k).into(),
                            String::from_utf8_lossy(&v).into(),
                        );
                    }
                    if h.flags & END_STREAM != 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
        match headers.get("grpc-status").map(String::as_str) {
            Some("0") => {}
            other => {
                return Err(format!(
                    "grpc-status {other:?}: {:?}",
                    headers.get("grpc-message")
                ));
            }
        }
        // The gRPC message: a flag byte and a length, then the protobuf.
        Ok(body.get(5..).unwrap_or_default().to_vec())
    }
}

/// kubelet's registration of the plugin behind `registration_socket` on `node`: GetInfo, the
/// CSI driver's NodeGetInfo, the CSINode entry and Node labels, NotifyRegistrationStatus.
/// Returns what GetInfo said.
pub async fn register(
    client: &Client,
    node: &str,
    registration_socket: &Path,
) -> Result<PluginInfo, String> {
    let mut conn = KubeletConn::connect(registration_socket)
        .await
        .map_err(|e| format!("dialling {}: {e}", registration_socket.display()))?;
    let info = conn
        .unary(
            "/pluginregistration.Registration/GetInfo",
            &InfoRequest {}.encode_to_vec(),
        )
        .await?;
    let info = PluginInfo::decode(info.as_slice()).map_err(|e| e.to_string())?;
    if info.r#type != lvms::csi::registration::CSI_PLUGIN {
        return Err(format!("not a CSI plugin: {info:?}"));
    }
    // kubelet's CSI handler: NodeGetInfo on the endpoint, then the CSINode and Node.
    let channel = lvms::csi::client::connect(Path::new(&info.endpoint))
        .await
        .map_err(|e| format!("dialling {}: {e}", info.endpoint))?;
    let got = lvms::csi::proto::node_client::NodeClient::new(channel)
        .node_get_info(lvms::csi::proto::NodeGetInfoRequest {})
        .await
        .map_err(|e| format!("NodeGetInfo: {e}"))?
        .into_inner();
    let segments = got
        .accessible_topology
        .map(|t| t.segments)
        .unwrap_or_default();
    let keys: Vec<&String> = segments.keys().collect();
    let csi_node = json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {"name": node},
        "spec": {"drivers": [{"name": info.name, "nodeID": got.node_id, "topologyKeys": keys}]}
    });
    let pp = PatchParams::apply("kubelet").force();
    Api::<CSINode>::all(client.clone())
        .patch(node, &pp, &Patch::Apply(&csi_node))
        .await
        .map_err(|e| format!("CSINode: {e}"))?;
    Api::<Node>::all(client.clone())
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": segments}})),
        )
        .await
        .map_err(|e| format!("Node labels: {e}"))?;
    let status = RegistrationStatus {
        plugin_registered: true,
        error: String::new(),
    };
    conn.unary(
        "/pluginregistration.Registration/NotifyRegistrationStatus",
        &status.encode_to_vec(),
    )
    .await?;
    Ok(info)
}
