//! One node with a thick class on a loop disk, the operator's CSI socket, and what the tests
//! read back (lvs, the Node's capacity annotation, LogicalVolumes).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use lvms::api::LogicalVolume;
use lvms::csi::proto::CreateVolumeRequest;
use lvms::csi::proto::controller_client::ControllerClient;
use lvms::csi::proto::node_client::NodeClient;
use lvms_testkit::dev::operator::OperatorProcess;
use lvms_testkit::disks::{Disk, lvm, require_prerequisites};
use lvms_testkit::fixtures::{host_selector, lvm_cluster};
use lvms_testkit::kubelet::create_node;
use lvms_testkit::{Scenario, eventually};
use serde_json::json;
use tonic::transport::Channel;

pub const T: Duration = Duration::from_secs(60);
pub const NODE: &str = "node-a";
pub const MIB: u64 = 1 << 20;

pub struct ThickNode {
    pub s: Scenario,
    pub op: OperatorProcess,
    pub vgm: Option<OperatorProcess>,
    /// The device class and its VG (one name).
    pub class: String,
    pub _disk: Disk,
}

impl ThickNode {
    /// node-a with one thick default class on a 200 MiB loop disk, Ready, its capacity
    /// published. `vgm_env` goes to vg-manager (fault injection).
    pub async fn start(prefix: &str, vgm_env: &[(&str, &str)]) -> ThickNode {
        Self::start_with(prefix, vgm_env, 200, json!({})).await
    }

    /// [`ThickNode::start`] on a disk of `disk_mb`, with `extra` merged into the device class.
    pub async fn start_with(
        prefix: &str,
        vgm_env: &[(&str, &str)],
        disk_mb: u64,
        extra: serde_json::Value,
    ) -> ThickNode {
        require_prerequisites();
        let s = Scenario::new(prefix).await;
        // One VG name per scenario: a VG of an earlier scenario may still be on its disk.
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let i = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let class = format!("c{}x{i}", std::process::id());
        // Disk links are per process (/dev/lvms-e2e-<pid>/<name>): one name per scenario.
        let disk = Disk::new(&s.dir.join("disks"), &format!("d{i}"), disk_mb);
        create_node(&s.client, NODE, false).await;
        lvms_testkit::kubelet::register_with_topology(&s.client, NODE).await;
        let op = s.operator(&[], &[]);
        let vgm = s.vg_manager(NODE, vgm_env);
        let mut dc = json!({"name": class, "default": true, "nodeSelector": host_selector(NODE),
                            "deviceSelector": {"paths": [disk.link]}});
        if let (Some(dc), Some(extra)) = (dc.as_object_mut(), extra.as_object()) {
            dc.extend(extra.clone());
        }
        s.create_cluster(lvm_cluster("my-lvmcluster", json!([dc])))
            .await;
        // A class that never gets Ready fails with what vg-manager and the operator said.
        let ready = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(
            s.ready_vg_entry(NODE, &class, T, |_| true),
        ))
        .await;
        if let Err(p) = ready {
            let why = lvms::runtime::process::panic_message(p.as_ref())
                .unwrap_or_else(|| "panicked".into());
            let tail = |t: String| lvms_testkit::process::tail(&t, 30);
            panic!(
                "{why}\nvg-manager's log:\n{}\noperator's log:\n{}",
                tail(vgm.log_text()),
                tail(op.log_text())
            );
        }
        let n = ThickNode {
            s,
            op,
            vgm: Some(vgm),
            class,
            _disk: disk,
        };
        n.capacity_where(|c| c > 150 * MIB).await;
        n
    }

    /// A client of vg-manager's node socket (Identity + Node).
    pub async fn node(&self) -> NodeClient<Channel> {
        let socket = &self.vgm.as_ref().expect("vg-manager").csi_socket;
        NodeClient::new(
            lvms::csi::client::connect(socket)
                .await
                .expect("node socket"),
        )
    }

    pub async fn controller(&self) -> ControllerClient<Channel> {
        let path = self.op.csi_socket.clone();
        let channel = eventually(T, || {
            let path = path.clone();
            async move { lvms::csi::client::connect(&path).await.ok() }
        })
        .await
        .unwrap_or_else(|| panic!("no CSI socket at {}", path.display()));
        ControllerClient::new(channel)
    }

    /// `capacity.topolvm.io/<class>` on node-a.
    pub async fn capacity(&self) -> Option<u64> {
        let node = Api::<Node>::all(self.s.client.clone())
            .get(NODE)
            .await
            .expect("node-a");
        let key = format!("capacity.topolvm.io/{}", self.class);
        node.metadata.annotations?.get(&key)?.parse().ok()
    }

    /// Waits until the capacity annotation satisfies `ok`; returns it.
    pub async fn capacity_where(&self, ok: impl Fn(u64) -> bool) -> u64 {
        let got = eventually(T, || async { self.capacity().await.filter(|c| ok(*c)) }).await;
        got.unwrap_or_else(|| {
            panic!(
                "capacity annotation never matched (now {:?}); vg-manager log:\n{}",
                futures::executor::block_on(self.capacity()),
                self.vgm.as_ref().map(|v| v.log_text()).unwrap_or_default()
            )
        })
    }

    /// LV name → size in bytes, in the class's VG.
    pub fn lvs(&self) -> BTreeMap<String, u64> {
        let (ok, out) = lvm(
            "lvs",
            &[
                "--noheadings",
                "--units",
                "b",
                "--nosuffix",
                "-o",
                "lv_name,lv_size",
                &self.class,
            ],
        );
        assert!(ok, "lvs: {out}");
        out.lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let name = w.next()?;
                let size = w.next()?.parse().ok()?;
                Some((name.to_string(), size))
            })
            .collect()
    }

    pub fn logical_volumes(&self) -> Api<LogicalVolume> {
        Api::all(self.s.client.clone())
    }

    /// Whether no LogicalVolume names node-a now (`None`: the list failed, which says nothing).
    pub async fn none_on_node(&self) -> Option<bool> {
        let lvs = self
            .logical_volumes()
            .list(&kube::api::ListParams::default())
            .await
            .ok()?
            .items;
        Some(lvs.iter().all(|l| l.spec.node_name != NODE))
    }

    /// An upstream sidecar on the operator's CSI socket, with the control plane's kubeconfig.
    pub fn sidecar(&self, name: &str, args: &[&str]) -> lvms_testkit::dev::csi_peers::Sidecar {
        self.sidecar_env(name, args, &[])
    }

    pub fn sidecar_env(
        &self,
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> lvms_testkit::dev::csi_peers::Sidecar {
        let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        all.push(format!("--csi-address={}", self.op.csi_socket.display()));
        let kubeconfig = &lvms_testkit::env::env().cp.kubeconfig;
        lvms_testkit::dev::csi_peers::Sidecar::start(
            name,
            &all,
            env,
            kubeconfig,
            &self.s.dir.join(format!("{name}.log")),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Kills vg-manager (SIGKILL); [`ThickNode::restart_vg_manager`] starts it again.
    pub fn stop_vg_manager(&mut self) {
        if let Some(mut v) = self.vgm.take() {
            v.kill();
        }
    }

    /// csi-provisioner as a cluster runs it (topology, the claim's metadata), retrying fast.
    pub fn provisioner(&self) -> lvms_testkit::dev::csi_peers::Sidecar {
        self.sidecar_env(
            "csi-provisioner",
            &[
                "--feature-gates=Topology=true",
                "--extra-create-metadata",
                "--leader-election=false",
                "--timeout=30s",
                "--retry-interval-start=500ms",
                "--retry-interval-max=5s",
            ],
            &[("NAMESPACE", self.s.ns.name.as_str())],
        )
    }

    /// `lvms audit [--now] -o json` of this scenario's namespace: the report, and (kind, LV or
    /// object) of each finding of the nodes' and of the cluster's that `ours` accepts (other
    /// scenarios of this process leave theirs), sorted.
    pub fn audit(
        &self,
        now: bool,
        ours: impl Fn(&str) -> bool,
    ) -> (Vec<(String, String)>, serde_json::Value) {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_lvms"));
        cmd.args([
            "audit",
            "-o",
            "json",
            "--timeout",
            "60s",
            "-n",
            &self.s.ns.name,
        ]);
        if now {
            cmd.arg("--now");
        }
        let out = cmd
            .env("KUBECONFIG", &lvms_testkit::env::env().cp.kubeconfig)
            .output()
            .expect("lvms audit");
        assert!(
            out.status.success(),
            "lvms audit: {}\nvg-manager:\n{}",
            String::from_utf8_lossy(&out.stderr),
            lvms_testkit::process::tail(
                &self.vgm.as_ref().map(|v| v.log_text()).unwrap_or_default(),
                30
            )
        );
        let a: serde_json::Value = serde_json::from_slice(&out.stdout).expect("audit JSON");
        let what = |f: &serde_json::Value| {
            let what = f["lv"]
                .as_str()
                .or(f["logicalVolume"].as_str())
                .or(f["volumeGroup"].as_str())
                .unwrap_or_default()
                .to_string();
            (f["kind"].as_str().unwrap_or_default().to_string(), what)
        };
        let mut found: Vec<(String, String)> = a["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|n| n["findings"].as_array().cloned().unwrap_or_default())
            .map(|f| what(&f))
            .chain(
                a["cluster"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(what)
                    .filter(|(_, x)| ours(x)),
            )
            .collect();
        found.sort();
        (found, a)
    }

    /// The operator SIGKILLed and started again, as it was started (no env, no flags).
    pub fn restart_operator(&mut self) {
        self.op.kill();
        self.op = self.s.operator(&[], &[]);
    }

    pub fn restart_vg_manager(&mut self, env: &[(&str, &str)]) {
        self.stop_vg_manager();
        self.vgm = Some(self.s.vg_manager(NODE, env));
    }
}

/// A CreateVolume as csi-provisioner sends it for a WaitForFirstConsumer PVC on node-a.
pub fn create_request(name: &str, bytes: u64, class: &str) -> CreateVolumeRequest {
    lvms_testkit::fixtures::csi::create_volume(name, NODE, class, bytes)
}

/// The sidecars' retry: the same call again until it succeeds (each try 3 s).
pub async fn until_ok<T, F, Fut>(what: &str, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        match call().await {
            Ok(r) => return r.into_inner(),
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::debug!(%what, error = %e, "retrying");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => panic!("{what} never succeeded: {e}"),
        }
    }
}

pub fn timed<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.set_timeout(Duration::from_secs(3));
    r
}

/// CreateVolume, retried until it succeeds (as csi-provisioner does): the volume id.
pub async fn create_until_ok(ctl: ControllerClient<Channel>, req: CreateVolumeRequest) -> String {
    let v = until_ok("CreateVolume", || {
        let (mut c, r) = (ctl.clone(), req.clone());
        async move { c.create_volume(timed(r)).await }
    })
    .await;
    v.volume.expect("a volume").volume_id
}

/// ControllerExpandVolume to `bytes`, retried until it succeeds (as csi-resizer does).
pub async fn expand_until_ok(ctl: ControllerClient<Channel>, volume_id: String, bytes: u64) {
    let req = lvms::csi::proto::ControllerExpandVolumeRequest {
        volume_id,
        capacity_range: Some(lvms::csi::proto::CapacityRange {
            required_bytes: i64::try_from(bytes).unwrap_or(i64::MAX),
            limit_bytes: 0,
        }),
        ..Default::default()
    };
    until_ok("ControllerExpandVolume", || {
        let (mut c, r) = (ctl.clone(), req.clone());
        async move { c.controller_expand_volume(timed(r)).await }
    })
    .await;
}

/// DeleteVolume, retried until it succeeds (as csi-provisioner does).
pub async fn delete_until_ok(ctl: ControllerClient<Channel>, volume_id: String) {
    let req = lvms::csi::proto::DeleteVolumeRequest {
        volume_id,
        ..Default::default()
    };
    until_ok("DeleteVolume", || {
        let (mut c, r) = (ctl.clone(), req.clone());
        async move { c.delete_volume(timed(r)).await }
    })
    .await;
}
