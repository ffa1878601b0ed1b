//! deploy/ as a user installs it: the real kustomize renders deploy/default (namespace
//! overridden), server-side apply puts it on the real API server, and then `lvms operator` and
//! `lvms vg-manager` run with the credentials of their own ServiceAccounts (client
//! certificates for `system:serviceaccount:<ns>:<name>` from the harness CA), never as
//! cluster-admin: the RBAC in deploy/rbac is proven, not assumed.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use lvms::api::{LVMStateType, LVMVolumeGroupNodeStatus, VGStatusType};
use lvms_testkit::dev::deploy::{apply_all, render, write_namespace_overlay};
use lvms_testkit::dev::operator::{OperatorOptions, OperatorProcess};
use lvms_testkit::disks::{Disk, require_prerequisites, vg_names};
use lvms_testkit::events::assert_no_duplicate_events;
use lvms_testkit::fixtures::{lvm_cluster, thick_class};
use lvms_testkit::kubelet::{create_node, register_csi_node};
use lvms_testkit::{Scenario, eventually};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(60);

/// Renders and applies deploy/default into the scenario's namespace; returns the kubeconfigs
/// of the two ServiceAccounts.
async fn install(s: &Scenario) -> (PathBuf, PathBuf) {
    let overlay = s.dir.join("install");
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/default");
    write_namespace_overlay(&overlay, &base, &s.ns.name).expect("overlay");
    let objects = render(&overlay).unwrap_or_else(|e| panic!("{e}"));
    let kinds: Vec<String> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    for k in [
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "Role",
        "ClusterRoleBinding",
        "RoleBinding",
        "Deployment",
        "Service",
    ] {
        assert!(kinds.iter().any(|x| x == k), "no {k} rendered: {kinds:?}");
    }
    // Every binding subject follows the namespace override.
    for o in objects.iter().filter(|o| {
        matches!(
            o["kind"].as_str(),
            Some("RoleBinding" | "ClusterRoleBinding")
        )
    }) {
        for subj in o["subjects"].as_array().into_iter().flatten() {
            assert_eq!(subj["namespace"], s.ns.name.as_str(), "{o}");
        }
    }
    let applied = apply_all(&s.client, &objects)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(applied.len(), objects.len());

    // Everything reaches its expected state (no kubelet: no running Pods).
    let deploy: Api<Deployment> = Api::namespaced(s.client.clone(), &s.ns.name);
    let d = deploy.get("lvms-operator").await.expect("Deployment");
    let spec = d.spec.expect("spec");
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(
        spec.strategy.and_then(|st| st.type_).as_deref(),
        Some("Recreate")
    );
    let sas: Api<ServiceAccount> = Api::namespaced(s.client.clone(), &s.ns.name);
    for sa in ["lvms-operator", "vg-manager"] {
        sas.get(sa)
            .await
            .unwrap_or_else(|e| panic!("ServiceAccount {sa}: {e}"));
    }

    let cp = &lvms_testkit::env().cp;
    let kubeconfig = |sa: &str| {
        let path = s.dir.join(format!("{sa}.kubeconfig"));
        cp.write_kubeconfig_for(
            &format!("system:serviceaccount:{}:{sa}", s.ns.name),
            Some("system:serviceaccounts"),
            &path,
        )
        .expect("kubeconfig");
        path
    };
    (kubeconfig("lvms-operator"), kubeconfig("vg-manager"))
}

/// Takes `resource` out of the operator's ClusterRole (dropping rules left empty), adding
/// `instead` if given, as an admin editing the installed RBAC would.
async fn narrow_operator_role(
    s: &Scenario,
    resource: &str,
    instead: Option<k8s_openapi::api::rbac::v1::PolicyRule>,
) {
    let roles: Api<ClusterRole> = Api::all(s.client.clone());
    let mut role = roles.get("lvms-operator").await.expect("ClusterRole");
    let mut rules = role.rules.take().unwrap_or_default();
    for rule in &mut rules {
        if let Some(res) = rule.resources.as_mut() {
            res.retain(|r| r != resource);
        }
    }
    rules.retain(|r| r.resources.as_ref().is_none_or(|res| !res.is_empty()));
    rules.extend(instead);
    role.rules = Some(rules);
    role.metadata.managed_fields = None;
    roles
        .replace("lvms-operator", &Default::default(), &role)
        .await
        .expect("narrowing the ClusterRole");
}

fn operator_as(s: &Scenario, kubeconfig: &Path) -> OperatorProcess {
    OperatorProcess::start(&OperatorOptions {
        bin: PathBuf::from(env!("CARGO_BIN_EXE_lvms")),
        kubeconfig: kubeconfig.to_path_buf(),
        namespace: s.ns.name.clone(),
        journal_dir: s.journal_dir.clone(),
        log: s.dir.join("operator.log"),
        env: vec![],
        args: vec!["--leader-elect".into(), "--debounce".into(), "20ms".into()],
    })
    .expect("starting lvms operator")
}

/// What kubelet does when vg-manager's node plugin registers: topolvm.io on the CSINode with
/// TopoLVM's topology key, and that key as a label on the Node.
async fn kubelet_registers_with_topology(s: &Scenario) {
    use k8s_openapi::api::storage::v1::CSINode;
    let csi = lvms_testkit::fixtures::with_topology_keys(lvms_testkit::fixtures::csi_node(
        "node-a", true,
    ));
    Api::<CSINode>::all(s.client.clone())
        .patch(
            "node-a",
            &PatchParams::apply("test-kubelet").force(),
            &Patch::Apply(&csi),
        )
        .await
        .expect("CSINode");
    Api::<k8s_openapi::api::core::v1::Node>::all(s.client.clone())
        .patch(
            "node-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"topology.topolvm.io/node": "node-a"}}})),
        )
        .await
        .expect("topology label");
}

/// csi-provisioner and csi-resizer with the operator's ServiceAccount, as they run in its pod:
/// a claim on the class binds (with the capacity objects the provisioner publishes), grows,
/// and is deleted with its volume.
async fn provision_with_sidecars(
    s: &Scenario,
    op: &OperatorProcess,
    op_kc: &Path,
    vg: &str,
) -> Vec<lvms_testkit::dev::csi_peers::Sidecar> {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    // The sidecars' args as the installed Deployment has them, with what a pod would supply
    // filled in: the socket path, $(NAMESPACE), and no owning pod for the capacity objects.
    let deploy: Api<Deployment> = Api::namespaced(s.client.clone(), &s.ns.name);
    let d = deploy.get("lvms-operator").await.expect("Deployment");
    let containers = d
        .spec
        .and_then(|sp| sp.template.spec)
        .expect("pod spec")
        .containers;
    let socket = op.csi_socket.display().to_string();
    let start = |name: &str, extra: &[&str]| {
        let container = containers
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no {name} container in the Deployment"));
        let mut all: Vec<String> = container
            .args
            .iter()
            .flatten()
            .filter(|a| !a.starts_with("--http-endpoint"))
            .map(|a| {
                let a = a
                    .replace("/run/topolvm/csi-topolvm.sock", &socket)
                    .replace("$(NAMESPACE)", &s.ns.name);
                if a == "--capacity-ownerref-level=2" {
                    "--capacity-ownerref-level=-1".into()
                } else {
                    a
                }
            })
            .collect();
        all.extend(extra.iter().map(|a| a.to_string()));
        lvms_testkit::dev::csi_peers::Sidecar::start(
            name,
            &all,
            &[("NAMESPACE", s.ns.name.as_str())],
            op_kc,
            &s.dir.join(format!("{name}.log")),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let sidecars = vec![
        // Test pacing only: capacity polled and retries started sooner than the defaults.
        start(
            "csi-provisioner",
            &[
                "--capacity-poll-interval=2s",
                "--retry-interval-start=500ms",
            ],
        ),
        start("csi-resizer", &["--retry-interval-start=500ms"]),
    ];
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(s.client.clone(), &s.ns.name);
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data", "annotations": {"volume.kubernetes.io/selected-node": "node-a"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": format!("lvms-{vg}"),
                 "resources": {"requests": {"storage": "32Mi"}}}
    }))
    .expect("claim");
    pvcs.create(&Default::default(), &claim)
        .await
        .expect("claim");
    let logs = || {
        sidecars
            .iter()
            .map(|c| format!("{}:\n{}", c.name, c.log_text()))
            .collect::<String>()
    };
    let pv = eventually(Duration::from_secs(120), || async {
        let c = pvcs.get("data").await.ok()?;
        (c.status?.phase.as_deref() == Some("Bound")).then_some(c.spec?.volume_name?)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "the claim never bound with the operator's ServiceAccount:\n{}",
            logs()
        )
    });
    pvcs.patch(
        "data",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "48Mi"}}}})),
    )
    .await
    .expect("grow the claim");
    let pvs: Api<PersistentVolume> = Api::all(s.client.clone());
    eventually(Duration::from_secs(120), || async {
        let cap = pvs
            .get(&pv)
            .await
            .ok()?
            .spec?
            .capacity?
            .get("storage")?
            .0
            .clone();
        (cap == "48Mi").then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("the PV never grew:\n{}", logs()));
    let caps: Api<k8s_openapi::api::storage::v1::CSIStorageCapacity> =
        Api::namespaced(s.client.clone(), &s.ns.name);
    eventually(Duration::from_secs(60), || async {
        (!caps.list(&Default::default()).await.ok()?.items.is_empty()).then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("no CSIStorageCapacity published:\n{}", logs()));
    pvcs.delete("data", &DeleteParams::default())
        .await
        .expect("delete the claim");
    eventually(Duration::from_secs(120), || async {
        pvs.get_opt(&pv).await.ok()?.is_none().then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("the PV stayed:\n{}", logs()));
    sidecars
}

fn cluster(vg: &str, path: &str, labels: Value) -> Value {
    let mut class = thick_class(vg, path);
    class["fstype"] = json!("ext4");
    class["storageClassOptions"] = json!({"additionalLabels": labels});
    lvm_cluster("my-lvmcluster", json!([class]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_with_own_service_accounts_create_ready_edit_delete() {
    require_prerequisites();
    let s = Scenario::new("rbac").await;
    let (op_kc, vm_kc) = install(&s).await;
    let vg = format!("r{}", std::process::id());
    let d1 = Disk::new(&s.dir.join("disks"), "r1", 128);
    create_node(&s.client, "node-a", false).await;
    kubelet_registers_with_topology(&s).await;

    let op = operator_as(&s, &op_kc);
    let vm = s.vg_manager_as("node-a", &vm_kc, &[]);
    s.create_cluster(cluster(&vg, &d1.link, json!({"tier": "fast"})))
        .await;
    s.wait_state("my-lvmcluster", LVMStateType::Ready, T).await;
    let sidecars = provision_with_sidecars(&s, &op, &op_kc, &vg).await;
    let statuses: Api<LVMVolumeGroupNodeStatus> = Api::namespaced(s.client.clone(), &s.ns.name);
    let ns = statuses.get("node-a").await.expect("node status");
    assert!(
        ns.spec
            .lvm_vg_status
            .iter()
            .any(|e| e.name == vg && e.status == Some(VGStatusType::Ready))
    );

    // Edit: the StorageClass labels follow.
    s.clusters()
        .patch(
            "my-lvmcluster",
            &PatchParams::default(),
            &Patch::Merge(&cluster(&vg, &d1.link, json!({"tier": "slow"}))),
        )
        .await
        .expect("edit");
    let scs: Api<StorageClass> = Api::all(s.client.clone());
    let sc = format!("lvms-{vg}");
    eventually(T, || async {
        let got = scs.get_opt(&sc).await.ok()??;
        (got.metadata.labels?.get("tier")? == "slow").then_some(())
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "StorageClass {sc} never relabelled; operator log:\n{}",
            op.log_text()
        )
    });

    // Delete: vg-manager removes its VG, the operator tears down and drops the finalizer.
    s.clusters()
        .delete("my-lvmcluster", &DeleteParams::default())
        .await
        .expect("delete");
    register_csi_node(&s.client, "node-a", false).await;
    eventually(T, || async {
        s.cluster("my-lvmcluster").await.is_none().then_some(())
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "LVMCluster not deleted; operator log:\n{}\nvg-manager log:\n{}",
            op.log_text(),
            vm.log_text()
        )
    });
    assert!(!vg_names().contains(&vg), "VG left behind");
    for (who, p) in [("operator", &op), ("vg-manager", &vm)] {
        let log = p.log_text();
        assert!(
            !log.contains("is forbidden"),
            "{who} was refused something with its own ServiceAccount:\n{log}"
        );
    }
    for sc in &sidecars {
        let log = sc.log_text();
        assert!(
            !log.contains("forbidden"),
            "{} was refused something with the operator's ServiceAccount:\n{log}",
            sc.name
        );
    }
    assert_no_duplicate_events(&s.events().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_rule_is_reported_as_forbidden_not_a_hang() {
    let s = Scenario::new("rbac-missing").await;
    let (op_kc, _) = install(&s).await;
    create_node(&s.client, "node-a", false).await;
    register_csi_node(&s.client, "node-a", true).await;
    // The operator may still read StorageClasses, but no longer write them.
    let read_only = k8s_openapi::api::rbac::v1::PolicyRule {
        api_groups: Some(vec!["storage.k8s.io".into()]),
        resources: Some(vec!["storageclasses".into()]),
        verbs: vec!["get".into(), "list".into(), "watch".into()],
        ..Default::default()
    };
    narrow_operator_role(&s, "storageclasses", Some(read_only)).await;

    let op = operator_as(&s, &op_kc);
    s.create_cluster(cluster("vg1", "/dev/lvms-none", json!({})))
        .await;
    let forbidden = eventually(T, || async {
        s.events().await.into_iter().find(|e| {
            e.reason.as_deref() == Some("ResourceReconciliationIncomplete")
                && e.note.as_deref().is_some_and(|n| n.contains("forbidden"))
        })
    })
    .await
    .unwrap_or_else(|| panic!("no Forbidden Event; operator log:\n{}", op.log_text()));
    let note = forbidden.note.unwrap_or_default();
    assert!(note.contains("storageclasses"), "{note}");
    // The status follows the failed pass (the Event may come first).
    let cond = eventually(T, || async {
        let c = s.cluster("my-lvmcluster").await?;
        c.status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "ResourcesAvailable" && c.message.contains("forbidden"))
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "ResourcesAvailable never said why; status: {:#?}",
            futures::executor::block_on(s.cluster("my-lvmcluster")).and_then(|c| c.status)
        )
    });
    assert_eq!(cond.status, "False");
    // The rest still converged: not a hang.
    let vgs: Api<lvms::api::LVMVolumeGroup> = Api::namespaced(s.client.clone(), &s.ns.name);
    assert!(vgs.get_opt("vg1").await.expect("get").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_the_operator_may_not_list_is_named_by_readyz() {
    let s = Scenario::new("rbac-watch").await;
    let (op_kc, _) = install(&s).await;
    // CSINodes removed from the operator's ClusterRole altogether: its cache cannot sync.
    narrow_operator_role(&s, "csinodes", None).await;
    let op = operator_as(&s, &op_kc);
    let body = eventually(T, || async {
        match op.diagnostics_get("/readyz") {
            Ok((503, body)) if body.contains("forbidden") => Some(body),
            _ => None,
        }
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "/readyz never named the refused watch; log:\n{}",
            op.log_text()
        )
    });
    assert!(
        body.contains("CsiNode") && body.contains("csinodes"),
        "{body}"
    );
    assert!(
        op.log_text().contains("watch refused"),
        "no error line naming the missing rule"
    );
}

/// A create with `dryRun=All` (admission runs, nothing is stored): its HTTP status, the
/// `Warning` headers' texts and the body.
async fn dry_create(client: &kube::Client, ns: &str, obj: &Value) -> (u16, Vec<String>, String) {
    let req = http::Request::post(format!(
        "/apis/lvm.topolvm.io/v1alpha1/namespaces/{ns}/lvmclusters?dryRun=All"
    ))
    .header("content-type", "application/json")
    .body(serde_json::to_vec(obj).unwrap().into())
    .unwrap();
    let resp = client.send(req).await.expect("the API server answers");
    let status = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let body = resp
        .into_body()
        .collect_bytes()
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    (status, warnings, body)
}

/// LVMS's LVMCluster webhook, as ValidatingAdmissionPolicies the real API server runs
/// (deploy/admission): its warnings on a create or an edit, its refusal of an LVMCluster
/// outside the operator's namespace (read from the installed ClusterRoleBinding, so the
/// namespace overlay needs no edit) and of a second LVMCluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_policies_warn_and_refuse_as_lvms_webhook_did() {
    let s = Scenario::new("admission").await;
    install(&s).await;
    let c = &s.client;
    let risky = lvm_cluster(
        "my-lvmcluster",
        json!([{"name": "vg1",
                "thinPoolConfig": {"name": "tp1", "sizePercent": 95, "overprovisionRatio": 10,
                                   "metadataSizeCalculationPolicy": "Static"}}]),
    );
    // The policies compile and their bindings take effect asynchronously.
    let warnings = eventually(T, || async {
        let (status, w, body) = dry_create(c, &s.ns.name, &risky).await;
        assert_eq!(status, 201, "{body}");
        (w.len() >= 5).then_some(w)
    })
    .await
    .expect("the warnings never came");
    let all = warnings.join("\n");
    for words in [
        "ThinPoolConfig.SizePercent for tp1 (device class vg1) is greater than 90%",
        "no default deviceClass was specified",
        "no device path(s) under deviceSelector.paths was specified for the vg1 deviceClass",
        "deviceDiscoveryPolicy is unset (Dynamic) for device class vg1 without explicit device paths",
        "metadata size is unset for the Static policy of device class vg1: lvms sets it to 1Gi",
    ] {
        assert!(all.contains(words), "missing {words:?} in:\n{all}");
    }
    // A careful cluster draws none.
    let careful = lvm_cluster(
        "my-lvmcluster",
        json!([{"name": "vg1", "default": true, "deviceSelector": {"paths": ["/dev/loop10"]},
                "thinPoolConfig": {"name": "tp1", "sizePercent": 90, "overprovisionRatio": 10}}]),
    );
    let (status, w, body) = dry_create(c, &s.ns.name, &careful).await;
    assert_eq!((status, w.len()), (201, 0), "{w:?} {body}");

    // Elsewhere: refused, naming the namespace to use. Each policy's binding takes effect on
    // its own, so the warnings above say nothing about this one yet.
    let body = eventually(T, || async {
        let (status, _, body) = dry_create(c, "default", &careful).await;
        (status == 403).then_some(body)
    })
    .await
    .expect("an LVMCluster outside the operator's namespace was never refused");
    assert!(
        body.contains(&format!(
            "creating LVMCluster is only supported within namespace {}",
            s.ns.name
        )) && body.contains("not default"),
        "{body}"
    );

    // A second one: refused, naming the first; the first stays editable.
    s.create_cluster(careful.clone()).await;
    let mut second = careful.clone();
    second["metadata"]["name"] = json!("second");
    let body = eventually(T, || async {
        let (status, _, body) = dry_create(c, &s.ns.name, &second).await;
        (status == 403).then_some(body)
    })
    .await
    .expect("a second LVMCluster was never refused");
    assert!(
        body.contains(&format!(
            "LVMCluster exists at {}/my-lvmcluster: duplicate LVMClusters are not allowed",
            s.ns.name
        )),
        "{body}"
    );
    s.clusters()
        .patch(
            "my-lvmcluster",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"edited": "yes"}}})),
        )
        .await
        .expect("an edit of the one LVMCluster");
}

/// A client of the API server authenticated by `token` (the harness's server and CA).
async fn client_with_token(token: &str) -> kube::Client {
    let path = &lvms_testkit::env().cp.kubeconfig;
    let mut kc = kube::config::Kubeconfig::read_from(path).expect("kubeconfig");
    for named in &mut kc.auth_infos {
        named.auth_info = Some(serde_json::from_value(json!({ "token": token })).expect("auth"));
    }
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(cfg).expect("client")
}

/// A write's answer: Ok, or the API server's status code and message.
fn refusal<T>(r: kube::Result<T>) -> Option<(u16, String)> {
    match r {
        Ok(_) => None,
        Err(kube::Error::Api(s)) => Some((s.code, s.message)),
        Err(e) => Some((0, e.to_string())),
    }
}

/// Issue 38: the vg-manager ClusterRole lets it write any Node, LogicalVolume and node status;
/// the admission policy binds its writes to the node its Pod's token names. A token bound to a
/// vg-manager Pod on node-b (a TokenRequest, as kubelet makes for the Pod) writes node-b's
/// objects and is refused node-a's, naming both nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vg_manager_token_bound_to_one_node_writes_only_that_node() {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use lvms::api::LogicalVolume;
    let s = Scenario::new("own-node").await;
    install(&s).await;
    for n in ["node-a", "node-b"] {
        create_node(&s.client, n, false).await;
    }
    // The vg-manager Pod of node-b (no kubelet runs it: the token binds to the object).
    let pods: Api<Pod> = Api::namespaced(s.client.clone(), &s.ns.name);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "vg-manager-b"},
        "spec": {"nodeName": "node-b", "serviceAccountName": "vg-manager",
                 "containers": [{"name": "vg-manager", "image": "quay.io/lvms/lvms:dev"}]}
    }))
    .unwrap();
    let pod = pods
        .create(&Default::default(), &pod)
        .await
        .expect("the Pod");
    let sas: Api<ServiceAccount> = Api::namespaced(s.client.clone(), &s.ns.name);
    let request = serde_json::from_value(json!({
        "spec": {"audiences": [], "expirationSeconds": 3600,
                 "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "vg-manager-b",
                                    "uid": pod.metadata.uid}}
    }))
    .unwrap();
    let token = sas
        .create_token_request("vg-manager", &Default::default(), &request)
        .await
        .expect("TokenRequest")
        .status
        .expect("a token")
        .token;
    let vgm = client_with_token(&token).await;

    let nodes: Api<Node> = Api::all(vgm.clone());
    let annotate = |value: &str| {
        Patch::Merge(json!({"metadata": {"annotations": {"capacity.topolvm.io/test": value}}}))
    };
    // The binding takes effect asynchronously: wait for the first refusal.
    let refused = eventually(T, || async {
        refusal(
            nodes
                .patch("node-a", &PatchParams::default(), &annotate("1"))
                .await,
        )
        .filter(|(code, _)| *code == 403)
    })
    .await
    .expect("node-b's vg-manager was never refused node-a");
    assert!(
        refused
            .1
            .contains("the vg-manager of node node-b may write only its own Node, not node-a"),
        "{refused:?}"
    );
    nodes
        .patch("node-b", &PatchParams::default(), &annotate("1"))
        .await
        .expect("its own Node");

    // Node statuses: its own only.
    let statuses: Api<LVMVolumeGroupNodeStatus> = Api::namespaced(vgm.clone(), &s.ns.name);
    for (node, allowed) in [("node-a", false), ("node-b", true)] {
        let status: LVMVolumeGroupNodeStatus = serde_json::from_value(json!({
            "apiVersion": "lvm.topolvm.io/v1alpha1", "kind": "LVMVolumeGroupNodeStatus",
            "metadata": {"name": node}, "spec": {"nodeStatus": []}
        }))
        .unwrap();
        let got = refusal(statuses.create(&Default::default(), &status).await);
        match (allowed, got) {
            (true, None) => {}
            (false, Some((403, m))) if m.contains("may write only its own node status") => {}
            other => panic!("node status {node}: {other:?}"),
        }
    }

    // LogicalVolumes (made by the controller, here the admin): only node-b's status.
    let admin_lvs: Api<LogicalVolume> = Api::all(s.client.clone());
    for node in ["node-a", "node-b"] {
        let lv: LogicalVolume = serde_json::from_value(json!({
            "apiVersion": "topolvm.io/v1", "kind": "LogicalVolume",
            "metadata": {"name": format!("lv-{node}-{}", std::process::id())},
            "spec": {"name": "x", "nodeName": node, "size": "1Gi", "deviceClass": "vg1"}
        }))
        .unwrap();
        admin_lvs
            .create(&Default::default(), &lv)
            .await
            .expect("LogicalVolume");
    }
    let lvs: Api<LogicalVolume> = Api::all(vgm);
    let status = |id: &str| Patch::Merge(json!({"status": {"volumeID": id}}));
    let a = format!("lv-node-a-{}", std::process::id());
    let b = format!("lv-node-b-{}", std::process::id());
    let got = refusal(
        lvs.patch_status(&a, &PatchParams::default(), &status("stolen"))
            .await,
    );
    assert!(
        matches!(&got, Some((403, m)) if m.contains("may write only LogicalVolumes of its own node")),
        "{got:?}"
    );
    lvs.patch_status(&b, &PatchParams::default(), &status("ok"))
        .await
        .expect("its own node's LogicalVolume");
    for name in [a, b] {
        let _ = admin_lvs.delete(&name, &DeleteParams::default()).await;
    }
}

/// Issue 38: /metrics as LVMS serves it. Both processes run with their own ServiceAccounts'
/// credentials and the shipped RBAC; a scraper verifies the operator's certificate (a serving
/// Secret's pair in the mounted directory, signed by a CA it trusts) and sends its token. A
/// token bound to `lvms-metrics-reader` reads the registry; a ServiceAccount without that
/// binding gets 403, no token or a forged one 401; the plain diagnostics port serves the
/// probes only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_over_tls_to_the_reader_role_only() {
    use lvms::telemetry::metrics::exposition::parse;
    use lvms_testkit::metrics::{READER_ROLE, scrape, token};
    let s = Scenario::new("metrics-auth").await;
    let (op_kc, vm_kc) = install(&s).await;
    create_node(&s.client, "node-a", false).await;
    let cp = &lvms_testkit::env().cp;
    let certs = s.dir.join("metrics-cert");
    std::fs::create_dir_all(&certs).unwrap();
    std::fs::copy(cp.pki.serving_cert(), certs.join("tls.crt")).unwrap();
    std::fs::copy(cp.pki.serving_key(), certs.join("tls.key")).unwrap();
    let op = OperatorProcess::start(&OperatorOptions {
        bin: PathBuf::from(env!("CARGO_BIN_EXE_lvms")),
        kubeconfig: op_kc.clone(),
        namespace: s.ns.name.clone(),
        journal_dir: s.journal_dir.clone(),
        log: s.dir.join("operator.log"),
        env: vec![],
        args: vec!["--metrics-cert-dir".into(), certs.display().to_string()],
    })
    .expect("starting lvms operator");
    let vm = s.vg_manager_as("node-a", &vm_kc, &[]);
    let reader = token(&s.client, &s.ns.name, "scraper", Some(READER_ROLE)).await;
    let stranger = token(&s.client, &s.ns.name, "stranger", None).await;
    let ca = cp.pki.serving_ca();
    let port = op.metrics_port().expect("the operator's metrics port");

    let served = eventually(T, || async {
        scrape(port, Some(&reader), Some(&ca))
            .ok()
            .filter(|(code, _)| *code == 200)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "the reader never got the operator's /metrics: {:?}\n{}",
            scrape(port, Some(&reader), Some(&ca)),
            op.log_text()
        )
    });
    let e = parse(&served.1).unwrap_or_else(|e| panic!("{e}\n{}", served.1));
    assert!(
        e.value("lvms_journal_open_intents", &[]).is_some(),
        "{}",
        served.1
    );

    let (code, body) = scrape(port, Some(&stranger), Some(&ca)).unwrap();
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains(&format!("system:serviceaccount:{}:stranger", s.ns.name))
            && body.contains(READER_ROLE),
        "{body}"
    );
    let (code, body) = scrape(port, None, Some(&ca)).unwrap();
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("Authorization: Bearer"), "{body}");
    let (code, body) = scrape(port, Some("forged.token.value"), Some(&ca)).unwrap();
    assert_eq!(code, 401, "{body}");
    assert!(!body.contains("lvms_"), "{body}");
    // Nothing of it in the clear: the probe port has no /metrics, the metrics port no HTTP.
    assert_eq!(op.diagnostics_get("/metrics").unwrap().0, 404);
    assert_eq!(op.diagnostics_get("/healthz").unwrap().0, 200);
    let plain = {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = c.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n");
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        String::from_utf8_lossy(&out).to_string()
    };
    assert!(!plain.contains("lvms_"), "{plain}");

    // vg-manager: its own ServiceAccount checks the token too; its certificate self-signed.
    // Its pass counters appear with its first pass, which may end after /metrics is served.
    let scraped = eventually(T, || async {
        vm.metrics_get(&reader)
            .ok()
            .filter(|(c, b)| *c != 0 && (*c != 200 || b.contains("lvms_reconcile")))
    })
    .await;
    let (code, body) = match scraped {
        Some(s) => s,
        None => vm.metrics_get(&reader).expect("vg-manager's /metrics"),
    };
    assert_eq!(code, 200, "{body}\n{}", vm.log_text());
    assert!(body.contains("lvms_reconcile"), "{body}");
    assert_eq!(vm.metrics_get(&stranger).unwrap().0, 403);
    for (who, p) in [("operator", &op), ("vg-manager", &vm)] {
        let log = p.log_text();
        assert!(
            !log.contains("is forbidden"),
            "{who} was refused something with its own ServiceAccount:\n{log}"
        );
    }
}
