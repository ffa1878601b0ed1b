//! `lvms-dev kubelet`: what kubelet does with a claim's volume on its node, for nodes without a
//! kubelet (the demo's guest node, the real-kernel tests): wait for the claim to be Bound, read
//! its PersistentVolume, and call the node service as kubelet's CSI volume plugin calls it
//! (NodePublishVolume with the PV's handle, attributes, fsType, mount options and access mode;
//! NodeUnpublishVolume; NodeExpandVolume after csi-resizer grew the volume, then the claim's
//! status as kubelet writes it; NodeGetVolumeStats). Retries what kubelet retries (the driver
//! unavailable or failing) until a deadline.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use tonic::Code;

use lvms::api::quantity::parse_quantity_bytes;
use lvms::csi::proto::node_client::NodeClient;
use lvms::csi::proto::volume_capability::{
    AccessMode, AccessType, BlockVolume, MountVolume, access_mode::Mode,
};
use lvms::csi::proto::*;

/// The claim's PV as kubelet reads it: `Err` names what is missing.
fn csi_source(
    pv: &PersistentVolume,
) -> Result<&k8s_openapi::api::core::v1::CSIPersistentVolumeSource, String> {
    pv.spec
        .as_ref()
        .and_then(|s| s.csi.as_ref())
        .ok_or_else(|| "the PersistentVolume has no spec.csi".to_string())
}

/// kubelet's volume capability for a PV: block or mount (fsType, mountOptions), and the access
/// mode its accessModes map to (ReadWriteOnce / ReadWriteOncePod: a single node writer).
pub fn capability(pv: &PersistentVolume) -> Result<VolumeCapability, String> {
    let spec = pv.spec.as_ref().ok_or("the PersistentVolume has no spec")?;
    let csi = csi_source(pv)?;
    let access_type = if spec.volume_mode.as_deref() == Some("Block") {
        AccessType::Block(BlockVolume {})
    } else {
        AccessType::Mount(MountVolume {
            fs_type: csi.fs_type.clone().unwrap_or_default(),
            mount_flags: spec.mount_options.clone().unwrap_or_default(),
            ..Default::default()
        })
    };
    let modes = spec.access_modes.clone().unwrap_or_default();
    let mode = if modes.iter().any(|m| m == "ReadOnlyMany") && modes.len() == 1 {
        Mode::MultiNodeReaderOnly
    } else {
        Mode::SingleNodeWriter
    };
    Ok(VolumeCapability {
        access_type: Some(access_type),
        access_mode: Some(AccessMode { mode: mode as i32 }),
    })
}

/// NodePublishVolume as kubelet sends it (no staging: the driver does not advertise it).
pub fn publish_request(
    pv: &PersistentVolume,
    target: &str,
    readonly: bool,
) -> Result<NodePublishVolumeRequest, String> {
    let csi = csi_source(pv)?;
    Ok(NodePublishVolumeRequest {
        volume_id: csi.volume_handle.clone(),
        target_path: target.to_string(),
        volume_capability: Some(capability(pv)?),
        readonly: readonly || csi.read_only.unwrap_or(false),
        volume_context: csi
            .volume_attributes
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect(),
        ..Default::default()
    })
}

/// What kubelet retries: the driver not answering, or failing for now.
pub fn retryable(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::Internal | Code::Aborted | Code::DeadlineExceeded | Code::Unknown
    )
}

pub fn volume_handle(pv: &PersistentVolume) -> Result<String, String> {
    Ok(csi_source(pv)?.volume_handle.clone())
}

fn pv_capacity(pv: &PersistentVolume) -> Option<u64> {
    let q = pv.spec.as_ref()?.capacity.as_ref()?.get("storage")?;
    parse_quantity_bytes(&q.0).ok()
}

fn claim_request(c: &PersistentVolumeClaim) -> Option<u64> {
    let q = c
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")?;
    parse_quantity_bytes(&q.0).ok()
}

/// One node-side stand-in for kubelet: a client, a node socket, a deadline.
pub struct Kubelet {
    pub client: kube::Client,
    pub socket: std::path::PathBuf,
    pub deadline: Instant,
}

impl Kubelet {
    fn left(&self) -> anyhow::Result<Duration> {
        self.deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| anyhow::anyhow!("deadline passed"))
    }

    /// The claim's PV once the claim is Bound (and, with `at_least`, once the PV's capacity
    /// reached it: csi-resizer's work is done).
    pub async fn bound_pv(
        &self,
        namespace: &str,
        claim: &str,
        at_least_request: bool,
    ) -> anyhow::Result<(PersistentVolumeClaim, PersistentVolume)> {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        let mut last = String::from("not read yet");
        loop {
            if self.left().is_err() {
                anyhow::bail!("claim {namespace}/{claim}: {last}");
            }
            match claims.get_opt(claim).await {
                Ok(Some(c)) => {
                    let bound = c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
                    let pv_name = c.spec.as_ref().and_then(|s| s.volume_name.clone());
                    match (bound, pv_name) {
                        (true, Some(name)) => match pvs.get_opt(&name).await {
                            Ok(Some(pv)) => {
                                let grown =
                                    !at_least_request || pv_capacity(&pv) >= claim_request(&c);
                                if grown {
                                    return Ok((c, pv));
                                }
                                last = format!("PV {name} not grown to the claim's request yet");
                            }
                            Ok(None) => last = format!("PV {name} not found"),
                            Err(e) => last = format!("reading PV {name}: {e}"),
                        },
                        _ => last = "not Bound".into(),
                    }
                }
                Ok(None) => last = "not found".into(),
                Err(e) => last = format!("reading it: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Call the node service until it answers something other than a retryable error.
    async fn call<T, F, Fut>(&self, what: &str, mut f: F) -> anyhow::Result<T>
    where
        F: FnMut(NodeClient<tonic::transport::Channel>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let mut last = String::new();
        while self.left().is_ok() {
            match lvms::csi::client::connect(&self.socket).await {
                Ok(ch) => match f(NodeClient::new(ch)).await {
                    Ok(r) => return Ok(r.into_inner()),
                    Err(s) if retryable(&s) => last = format!("{:?}: {}", s.code(), s.message()),
                    Err(s) => anyhow::bail!("{what}: {:?}: {}", s.code(), s.message()),
                },
                Err(e) => last = format!("connecting to {}: {e}", self.socket.display()),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        anyhow::bail!("{what}: deadline passed; last: {last}")
    }

    pub async fn publish(
        &self,
        namespace: &str,
        claim: &str,
        target: &str,
        readonly: bool,
    ) -> anyhow::Result<String> {
        let (_, pv) = self.bound_pv(namespace, claim, false).await?;
        let req = publish_request(&pv, target, readonly).map_err(anyhow::Error::msg)?;
        let id = req.volume_id.clone();
        self.call("NodePublishVolume", |mut c| {
            let req = req.clone();
            async move { c.node_publish_volume(req).await }
        })
        .await?;
        Ok(id)
    }

    pub async fn unpublish(
        &self,
        namespace: &str,
        claim: &str,
        target: &str,
    ) -> anyhow::Result<()> {
        let (_, pv) = self.bound_pv(namespace, claim, false).await?;
        let volume_id = volume_handle(&pv).map_err(anyhow::Error::msg)?;
        self.call("NodeUnpublishVolume", |mut c| {
            let req = NodeUnpublishVolumeRequest {
                volume_id: volume_id.clone(),
                target_path: target.to_string(),
            };
            async move { c.node_unpublish_volume(req).await }
        })
        .await?;
        Ok(())
    }

    /// After csi-resizer grew the volume: NodeExpandVolume, then the claim's status capacity
    /// as kubelet records a finished expansion.
    pub async fn expand(&self, namespace: &str, claim: &str, target: &str) -> anyhow::Result<u64> {
        let (_, pv) = self.bound_pv(namespace, claim, true).await?;
        let volume_id = volume_handle(&pv).map_err(anyhow::Error::msg)?;
        let cap = capability(&pv).map_err(anyhow::Error::msg)?;
        let bytes = pv_capacity(&pv).unwrap_or_default();
        let got = self
            .call("NodeExpandVolume", |mut c| {
                let req = NodeExpandVolumeRequest {
                    volume_id: volume_id.clone(),
                    volume_path: target.to_string(),
                    capacity_range: Some(CapacityRange {
                        required_bytes: i64::try_from(bytes).unwrap_or(i64::MAX),
                        limit_bytes: 0,
                    }),
                    volume_capability: Some(cap.clone()),
                    ..Default::default()
                };
                async move { c.node_expand_volume(req).await }
            })
            .await?;
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        let storage = pv
            .spec
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.clone())
            .unwrap_or_default();
        claims
            .patch_status(
                claim,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"capacity": {"storage": storage}, "conditions": Value::Null}})),
            )
            .await?;
        Ok(u64::try_from(got.capacity_bytes).unwrap_or_default())
    }

    pub async fn stats(&self, namespace: &str, claim: &str, target: &str) -> anyhow::Result<Value> {
        let (_, pv) = self.bound_pv(namespace, claim, false).await?;
        let volume_id = volume_handle(&pv).map_err(anyhow::Error::msg)?;
        let r = self
            .call("NodeGetVolumeStats", |mut c| {
                let req = NodeGetVolumeStatsRequest {
                    volume_id: volume_id.clone(),
                    volume_path: target.to_string(),
                    ..Default::default()
                };
                async move { c.node_get_volume_stats(req).await }
            })
            .await?;
        let usage: Vec<Value> = r
            .usage
            .iter()
            .map(|u| {
                json!({
                    "unit": volume_usage::Unit::try_from(u.unit).map(|x| x.as_str_name()).unwrap_or("UNKNOWN"),
                    "total": u.total, "used": u.used, "available": u.available,
                })
            })
            .collect();
        Ok(json!({
            "volumeId": volume_id,
            "usage": usage,
            "abnormal": r.volume_condition.as_ref().map(|c| c.abnormal),
            "message": r.volume_condition.map(|c| c.message),
        }))
    }
}

/// The node socket a stand-in dials by default: LVMS's.
pub fn default_socket() -> &'static Path {
    Path::new(lvms::csi::node::service::DEFAULT_NODE_SOCKET)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolumeSpec};

    fn pv(mode: Option<&str>, fs: Option<&str>) -> PersistentVolume {
        PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                volume_mode: mode.map(String::from),
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                mount_options: Some(vec!["noatime".into()]),
                csi: Some(CSIPersistentVolumeSource {
                    driver: "topolvm.io".into(),
                    volume_handle: "v-1".into(),
                    fs_type: fs.map(String::from),
                    volume_attributes: Some(
                        [("topolvm.io/device-class".to_string(), "thin".to_string())].into(),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_filesystem_pv_is_published_with_its_fstype_options_and_attributes() {
        let r = publish_request(&pv(None, Some("xfs")), "/t", false).unwrap();
        assert_eq!(r.volume_id, "v-1");
        assert_eq!(r.volume_context["topolvm.io/device-class"], "thin");
        let Some(AccessType::Mount(m)) = r.volume_capability.unwrap().access_type else {
            panic!("a mount capability");
        };
        assert_eq!(m.fs_type, "xfs");
        assert_eq!(m.mount_flags, ["noatime"]);
    }

    #[test]
    fn a_block_pv_is_published_as_a_block_device() {
        let r = publish_request(&pv(Some("Block"), None), "/t", true).unwrap();
        assert!(r.readonly);
        let cap = r.volume_capability.unwrap();
        assert!(matches!(cap.access_type, Some(AccessType::Block(_))));
        assert_eq!(cap.access_mode.unwrap().mode, Mode::SingleNodeWriter as i32);
    }

    #[test]
    fn a_pv_without_csi_is_refused_by_name() {
        let mut p = pv(None, None);
        p.spec.as_mut().unwrap().csi = None;
        assert!(
            publish_request(&p, "/t", false)
                .unwrap_err()
                .contains("spec.csi")
        );
    }

    #[test]
    fn what_kubelet_retries() {
        assert!(retryable(&tonic::Status::unavailable("x")));
        assert!(!retryable(&tonic::Status::not_found("x")));
        assert!(!retryable(&tonic::Status::invalid_argument("x")));
    }
}
