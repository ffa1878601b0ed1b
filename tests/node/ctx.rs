//! What every scenario of the tier shares: the control plane the node joined, the node, the
//! snapshot controller, and helpers that ask the cluster (never the node) what happened.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use lvms_testkit::dev::csi_peers::Sidecar;
use lvms_testkit::dev::{ControlPlane, Lifetime, Options};
use lvms_testkit::realnode::{NodeSpec, RealNode, build_images};
use serde_json::Value;

/// The node's name and its data disks (serial, MiB): the LVMCluster names them by id.
pub const NODE: &str = "lvms-node";
pub const DISK_A: &str = "lvms-d1";
pub const DISK_B: &str = "lvms-d2";
/// A disk no class of lvms's own scenarios names: the swap scenarios' Dynamic class takes it.
pub const DISK_C: &str = "lvms-d3";
/// The chart's namespace (its default).
pub const LVMS_NS: &str = "openshift-lvm-storage";
/// Where the scenarios' workloads live.
pub const APPS: &str = "apps";

/// Software emulation: a Pod start, an lvm2 command or an image unpack each take seconds.
pub const SLOW: Duration = Duration::from_secs(600);

pub struct Ctx {
    pub cp: ControlPlane,
    pub client: kube::Client,
    pub node: RealNode,
    pub dir: PathBuf,
    _snapshots: Sidecar,
    /// (what, seconds): the tier's figures, printed at the end.
    pub figures: Vec<(String, f64)>,
}

/// The node's data disks: (serial, MiB).
pub const DISKS: &[(&str, u64)] = &[(DISK_A, 2048), (DISK_B, 2048), (DISK_C, 1024)];

impl Ctx {
    pub async fn start() -> Ctx {
        Self::start_with_disks(DISKS).await
    }

    /// [`Ctx::start`] with other data disks (benches/node_versus.rs: a larger first disk).
    pub async fn start_with_disks(disks: &[(&str, u64)]) -> Ctx {
        let t0 = Instant::now();
        let dir = std::env::temp_dir()
            .join("lvms-node-tier")
            .join(std::process::id().to_string());
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("tier dir");
        let lvms = lvms_testkit::process::lvms_bin();
        let images_dir = dir.join("images");
        let images = tokio::task::spawn_blocking(move || build_images(&lvms, &images_dir))
            .await
            .expect("images");
        let mut opts = Options::new(dir.join("cp"), Lifetime::DieWithParent);
        opts.bin_dir = lvms_testkit::env::binaries();
        opts.real_nodes = true;
        let cp = ControlPlane::start(opts)
            .await
            .unwrap_or_else(|e| panic!("control plane: {e}"));
        let client = cp.client().await.expect("admin client");
        lvms_testkit::snapshots::install_api(&client).await;
        let snapshots = Sidecar::start(
            "snapshot-controller",
            &[
                "--leader-election=false".into(),
                lvms_testkit::snapshots::GROUP_SNAPSHOT_GATE.into(),
            ],
            &[],
            &cp.kubeconfig,
            &dir.join("snapshot-controller.log"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let spec = NodeSpec::new(NODE, disks);
        let node_dir = dir.join("node");
        let cp_ref = &cp;
        let mut node = RealNode::boot(cp_ref, &images, spec, &node_dir);
        let mut figures = vec![(
            "images and control plane".to_string(),
            t0.elapsed().as_secs_f64(),
        )];
        let ready = node.wait_ready(&client, Duration::from_secs(1200)).await;
        figures.push(("boot → Node Ready".to_string(), ready.as_secs_f64()));
        println!("node {NODE} Ready {:.0}s after boot", ready.as_secs_f64());
        let ctx = Ctx {
            cp,
            client,
            node,
            dir,
            _snapshots: snapshots,
            figures,
        };
        ctx.apply_json(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": APPS}
        }))
        .await;
        ctx
    }

    /// Server-side apply of one object (admin).
    pub async fn apply_json(&self, obj: Value) {
        lvms_testkit::dev::deploy::apply_all(&self.client, &[obj])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// The console, kubelet's and containerd's last lines: what a failure message carries.
    pub fn node_story(&self) -> String {
        let tail = |p: &str| {
            self.node
                .read_root_file(p)
                .map(|t| lvms_testkit::process::tail(&t, 25))
                .unwrap_or_else(|| format!("({p} unreadable)"))
        };
        format!(
            "--- console\n{}\n--- kubelet.log\n{}\n--- containerd.log\n{}",
            self.node.console_tail(30),
            tail("/var/log/kubelet.log"),
            tail("/var/log/containerd.log")
        )
    }

    /// Waits until `check` says yes, failing with `what` and the node's story after `within`.
    pub async fn until<T, F, Fut>(&mut self, what: &str, within: Duration, mut check: F) -> T
    where
        F: FnMut(kube::Client) -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let started = Instant::now();
        loop {
            if let Some(v) = check(self.client.clone()).await {
                return v;
            }
            if !self.node.running() || started.elapsed() > within {
                panic!(
                    "{what}: not after {:.0}s (node running: {})\n{}",
                    started.elapsed().as_secs_f64(),
                    self.node.running(),
                    self.node_story()
                );
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    /// Waits until the operator namespace is gone (an uninstall deletes it; the next install
    /// makes it again).
    pub async fn operator_namespace_gone(&mut self, what: &str) {
        self.until(what, SLOW, |cl| async move {
            let ns = Api::<k8s_openapi::api::core::v1::Namespace>::all(cl)
                .get_opt(LVMS_NS)
                .await
                .ok()?;
            ns.is_none().then_some(())
        })
        .await;
    }

    /// Waits until no Pod runs in the operator namespace.
    pub async fn operator_pods_gone(&mut self, what: &str, within: Duration) {
        self.until(what, within, |cl| async move {
            let pods = Api::<Pod>::namespaced(cl, LVMS_NS)
                .list(&kube::api::ListParams::default())
                .await
                .ok()?;
            pods.items.is_empty().then_some(())
        })
        .await;
    }

    /// Creates a Pod (in its namespace, `apps` when it names none).
    pub async fn start_pod(&mut self, pod: Value) -> String {
        let name = pod["metadata"]["name"]
            .as_str()
            .expect("pod name")
            .to_string();
        let p: Pod = serde_json::from_value(pod).expect("a Pod");
        let ns = p
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| APPS.to_string());
        Api::<Pod>::namespaced(self.client.clone(), &ns)
            .create(&PostParams::default(), &p)
            .await
            .unwrap_or_else(|e| panic!("creating pod {ns}/{name}: {e}"));
        name
    }

    /// Waits for Pod `apps/name` to end; returns its phase and termination messages.
    pub async fn pod_end(&mut self, name: &str) -> (String, String) {
        let name = name.to_string();
        self.until(&format!("pod {APPS}/{name} to finish"), SLOW, |c| {
            let name = name.clone();
            async move {
                let p = Api::<Pod>::namespaced(c, APPS).get(&name).await.ok()?;
                let s = p.status?;
                let phase = s.phase.clone().unwrap_or_default();
                if phase != "Succeeded" && phase != "Failed" {
                    return None;
                }
                let msg = s
                    .container_statuses
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.message.clone())
                    .collect::<Vec<_>>()
                    .join("\n");
                Some((phase, msg))
            }
        })
        .await
    }

    /// Waits until Pod `apps/name` runs (its containers started).
    pub async fn pod_running(&mut self, name: &str) -> Pod {
        let name = name.to_string();
        self.until(&format!("pod {APPS}/{name} Running"), SLOW, |c| {
            let name = name.clone();
            async move {
                let p = Api::<Pod>::namespaced(c, APPS).get(&name).await.ok()?;
                let running = p.status.as_ref()?.phase.as_deref() == Some("Running");
                running.then_some(p)
            }
        })
        .await
    }

    /// Deletes Pod `apps/name` and waits until it is gone (its volumes unpublished).
    pub async fn delete_pod(&mut self, name: &str) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), APPS);
        let _ = api.delete(name, &DeleteParams::default()).await;
        let name = name.to_string();
        self.until(&format!("pod {APPS}/{name} gone"), SLOW, |c| {
            let name = name.clone();
            async move {
                let gone = Api::<Pod>::namespaced(c, APPS)
                    .get_opt(&name)
                    .await
                    .ok()?
                    .is_none();
                gone.then_some(())
            }
        })
        .await;
    }

    /// Runs a Pod to completion and returns its termination message (what its script printed);
    /// a Pod that fails is a panic naming its message. The Pod is deleted afterwards.
    pub async fn run_pod(&mut self, pod: Value) -> String {
        let name = self.start_pod(pod).await;
        let (phase, message) = self.pod_end(&name).await;
        self.delete_pod(&name).await;
        assert_eq!(phase, "Succeeded", "pod {APPS}/{name} failed: {message}");
        message
    }

    /// The PersistentVolume claim `apps/name` is bound to (waits for the binding).
    pub async fn bound_pv(&mut self, name: &str) -> PersistentVolume {
        let name = name.to_string();
        self.until(&format!("claim {APPS}/{name} Bound"), SLOW, |c| {
            let name = name.clone();
            async move {
                let pvc = Api::<PersistentVolumeClaim>::namespaced(c.clone(), APPS)
                    .get(&name)
                    .await
                    .ok()?;
                let pv = pvc.spec?.volume_name?;
                Api::<PersistentVolume>::all(c).get(&pv).await.ok()
            }
        })
        .await
    }

    /// Runs `script` in the node's own namespaces (a privileged probe Pod) and returns its
    /// output.
    pub async fn on_node(&mut self, name: &str, script: &str) -> String {
        self.run_pod(crate::workloads::node_probe(name, script))
            .await
    }

    /// Prints the tier's figures. The work directory stays for a post-mortem; when every
    /// scenario passed, its disk images and image archives (~2.7 GB a run) go and its logs stay.
    pub fn finish(&mut self, all_passed: bool) {
        println!("node tier figures (this machine, software emulation):");
        for (what, s) in &self.figures {
            println!("  {what}: {s:.0} s");
        }
        if self.node.emulation_faults > 0 {
            println!(
                "  boots that died of an emulator fault and were powered on again: {}",
                self.node.emulation_faults
            );
        }
        if all_passed {
            let _ = std::fs::remove_dir_all(self.dir.join("images"));
            for entry in std::fs::read_dir(self.dir.join("node"))
                .into_iter()
                .flatten()
                .flatten()
            {
                if entry.path().extension().is_some_and(|e| e == "img") {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
            println!("node tier logs: {}", self.dir.display());
        } else {
            println!("node tier logs and disks: {}", self.dir.display());
        }
    }
}
