//! The `vg-manager` DaemonSet (LVMS unit `vg-manager`, `resource/vgmanager_daemonset.go`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet,
};
use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, HostPathVolumeSource,
    NodeAffinity, ObjectFieldSelector, PodSpec, PodTemplateSpec, Probe, ResourceRequirements,
    SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::LVMCluster;
use crate::operator::nodes::combined_node_selector;
use crate::operator::owner::controller_owner_ref;
use crate::operator::world::{Capabilities, PriorityClassChoice, World};

pub const VG_MANAGER_NAME: &str = "vg-manager";
pub const VG_MANAGER_SERVICE_ACCOUNT: &str = "vg-manager";
pub const PRIORITY_CLASS_USER_CRITICAL: &str = "openshift-user-critical";
/// Secret with the vg-manager metrics serving certificate.
pub const METRICS_CERT_SECRET: &str = "vg-manager-metrics-cert";
/// Named container port of the health endpoints (`/healthz`, `/readyz`).
pub const HEALTHZ_PORT_NAME: &str = "healthz";
pub const HEALTHZ_PORT: i32 = 8081;
/// `/metrics` over HTTPS (`vg-manager-metrics-service`), LVMS's port.
pub const METRICS_PORT_NAME: &str = "metrics";
pub const METRICS_PORT: i32 = 8443;

pub const LABEL_NAME: &str = "app.kubernetes.io/name";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const LABEL_PART_OF: &str = "app.kubernetes.io/part-of";
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
pub const MANAGED_BY_VALUE: &str = "lvms-operator";
pub const PART_OF_VALUE: &str = "lvms-provisioner";

/// OpenShift workload partitioning: vg-manager runs on the management CPU set.
pub const WORKLOAD_MANAGEMENT_ANNOTATION: &str = "target.workload.openshift.io/management";
pub const WORKLOAD_MANAGEMENT_VALUE: &str = r#"{"effect": "PreferredDuringScheduling"}"#;

const CPU_REQUEST: &str = "5m";
const MEMORY_REQUEST: &str = "45Mi";

/// The vg-manager Pods' PriorityClass: LVMS's on OpenShift, none elsewhere unless named.
pub fn priority_class(choice: &PriorityClassChoice, capabilities: &Capabilities) -> Option<String> {
    match choice {
        PriorityClassChoice::Auto => capabilities
            .scc
            .then(|| PRIORITY_CLASS_USER_CRITICAL.to_owned()),
        PriorityClassChoice::None => None,
        PriorityClassChoice::Named(name) => Some(name.clone()),
    }
}

/// Labels of the DaemonSet, its selector and its pods (all four, as in LVMS).
pub fn vg_manager_labels() -> BTreeMap<String, String> {
    [
        (LABEL_NAME, VG_MANAGER_NAME),
        (LABEL_MANAGED_BY, MANAGED_BY_VALUE),
        (LABEL_PART_OF, PART_OF_VALUE),
        (LABEL_COMPONENT, VG_MANAGER_NAME),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// A host directory bind-mounted into the vg-manager container.
struct HostDir {
    name: &'static str,
    host_path: &'static str,
    /// hostPath `type`; None = no check.
    type_: Option<&'static str>,
    mount_path: &'static str,
    propagation: Option<&'static str>,
}

const CREATE: Option<&str> = Some("DirectoryOrCreate");
const BIDIRECTIONAL: Option<&str> = Some("Bidirectional");
const FROM_HOST: Option<&str> = Some("HostToContainer");

/// In LVMS's order. The kubelet directories are created if missing; the pods and CSI plugin
/// directories propagate mounts both ways so mounts made by the node plugin reach the kubelet.
const HOST_DIRS: [HostDir; 10] = [
    HostDir {
        name: "registration-dir",
        host_path: "/var/lib/kubelet/plugins_registry/",
        type_: CREATE,
        mount_path: "/registration",
        propagation: None,
    },
    HostDir {
        name: "node-plugin-dir",
        host_path: "/var/lib/kubelet/plugins/topolvm.io/node",
        type_: CREATE,
        mount_path: "/run/topolvm",
        propagation: None,
    },
    HostDir {
        name: "file-lock-dir",
        host_path: "/var/lock",
        type_: CREATE,
        mount_path: "/var/lock",
        propagation: None,
    },
    HostDir {
        name: "csi-plugin-dir",
        host_path: "/var/lib/kubelet/plugins/kubernetes.io/csi",
        type_: CREATE,
        mount_path: "/var/lib/kubelet/plugins/kubernetes.io/csi",
        propagation: BIDIRECTIONAL,
    },
    HostDir {
        name: "pod-volumes-dir",
        host_path: "/var/lib/kubelet/pods/",
        type_: CREATE,
        mount_path: "/var/lib/kubelet/pods",
        propagation: BIDIRECTIONAL,
    },
    HostDir {
        name: "lvmd-config",
        host_path: "/etc/topolvm",
        type_: CREATE,
        mount_path: "/etc/topolvm",
        propagation: FROM_HOST,
    },
    HostDir {
        name: "device-dir",
        host_path: "/dev",
        type_: Some("Directory"),
        mount_path: "/dev",
        propagation: FROM_HOST,
    },
    HostDir {
        name: "run-udev",
        host_path: "/run/udev",
        type_: None,
        mount_path: "/run/udev",
        propagation: FROM_HOST,
    },
    HostDir {
        name: "sys",
        host_path: "/sys",
        type_: None,
        mount_path: "/sys",
        propagation: FROM_HOST,
    },
    // vg-manager's journal (`--journal-dir` defaults to /var/lib/lvms/journal): on the host,
    // so a container or pod restart replays open intents and keeps the post-mortem record.
    HostDir {
        name: "journal-dir",
        host_path: "/var/lib/lvms",
        type_: CREATE,
        mount_path: "/var/lib/lvms",
        propagation: None,
    },
];

/// Volumes and their mounts: the host directories, then the metrics certificate.
fn volumes_and_mounts() -> (Vec<Volume>, Vec<VolumeMount>) {
    let mut volumes: Vec<Volume> = HOST_DIRS
        .iter()
        .map(|d| Volume {
            name: d.name.to_owned(),
            host_path: Some(HostPathVolumeSource {
                path: d.host_path.to_owned(),
                type_: d.type_.map(str::to_owned),
            }),
            ..Default::default()
        })
        .collect();
    let mut mounts: Vec<VolumeMount> = HOST_DIRS
        .iter()
        .map(|d| VolumeMount {
            name: d.name.to_owned(),
            mount_path: d.mount_path.to_owned(),
            mount_propagation: d.propagation.map(str::to_owned),
            ..Default::default()
        })
        .collect();
    volumes.push(Volume {
        name: "metrics-cert".to_owned(),
        // LVMS gets this Secret from OpenShift's service-serving-certificate annotation; on
        // plain Kubernetes nothing creates it, and a required Secret would keep every
        // vg-manager pod from starting: without it vg-manager serves a self-signed one.
        secret: Some(SecretVolumeSource {
            secret_name: Some(METRICS_CERT_SECRET.to_owned()),
            default_mode: Some(0o644),
            optional: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    });
    mounts.push(VolumeMount {
        read_only: Some(true),
        name: "metrics-cert".to_owned(),
        mount_path: "/tmp/k8s-metrics-server/serving-certs".to_owned(),
        ..Default::default()
    });
    (volumes, mounts)
}

fn http_probe(path: &str, failure: i32, initial_delay: i32, timeout: i32, period: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            port: IntOrString::String(HEALTHZ_PORT_NAME.to_owned()),
            ..Default::default()
        }),
        failure_threshold: Some(failure),
        initial_delay_seconds: Some(initial_delay),
        timeout_seconds: Some(timeout),
        period_seconds: Some(period),
        ..Default::default()
    }
}

fn field_env(name: &str, field_path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: field_path.to_owned(),
                api_version: None,
            }),
            ..Default::default()
        }),
        value: None,
    }
}

fn value_env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        value_from: None,
    }
}

/// vg-manager's CSI node socket inside its container (the host's
/// `/var/lib/kubelet/plugins/topolvm.io/node`, mounted at `/run/topolvm`).
pub const CONTAINER_NODE_SOCKET: &str = "/run/topolvm/csi-topolvm.sock";

fn container(world: &World, mounts: Vec<VolumeMount>) -> Container {
    let requests = BTreeMap::from([
        ("cpu".to_owned(), Quantity(CPU_REQUEST.to_owned())),
        ("memory".to_owned(), Quantity(MEMORY_REQUEST.to_owned())),
    ]);
    Container {
        name: VG_MANAGER_NAME.to_owned(),
        image: Some(world.settings.image.clone()),
        command: Some(world.settings.vg_manager_command.clone()),
        // Privileged root: vg-manager runs LVM and mount on the host through nsenter.
        security_context: Some(SecurityContext {
            privileged: Some(true),
            run_as_user: Some(0),
            ..Default::default()
        }),
        ports: Some(
            [
                (HEALTHZ_PORT_NAME, HEALTHZ_PORT),
                (METRICS_PORT_NAME, METRICS_PORT),
            ]
            .into_iter()
            .map(|(name, port)| ContainerPort {
                name: Some(name.to_owned()),
                container_port: port,
                protocol: Some("TCP".to_owned()),
                ..Default::default()
            })
            .collect(),
        ),
        // Up to 60 x 10s for start-up: creating large volume groups takes a while.
        startup_probe: Some(http_probe("/healthz", 60, 2, 2, 10)),
        liveness_probe: Some(http_probe("/healthz", 3, 1, 1, 30)),
        readiness_probe: Some(http_probe("/readyz", 3, 1, 1, 60)),
        volume_mounts: Some(mounts),
        resources: Some(ResourceRequirements {
            requests: Some(requests),
            ..Default::default()
        }),
        // Same env as LVMS; the Go runtime knobs are inert for this binary but kept for parity.
        env: Some(vec![
            value_env("GOMEMLIMIT", &format!("{MEMORY_REQUEST}B")),
            value_env("GOGC", "120"),
            value_env("GOMAXPROCS", "2"),
            field_env("NODE_NAME", "spec.nodeName"),
            field_env("NAMESPACE", "metadata.namespace"),
            field_env("NAME", "metadata.name"),
            // The node plugin's host directory is mounted at /run/topolvm, kubelet's
            // plugins_registry at /registration (LVMS's mounts); kubelet dials the host path.
            value_env("LVMS_CSI_NODE_SOCKET", CONTAINER_NODE_SOCKET),
            value_env("LVMS_REGISTRATION_DIR", "/registration"),
        ]),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Default::default()
    }
}

/// The desired vg-manager DaemonSet for `cluster`: image and command from the settings,
/// tolerations from the spec, node affinity = OR of the classes' selector terms (none when a
/// class has no selector), controller ownerRef to the cluster.
pub fn vg_manager_daemonset(cluster: &LVMCluster, world: &World) -> DaemonSet {
    let labels = vg_manager_labels();
    let (volumes, mounts) = volumes_and_mounts();
    let affinity = combined_node_selector(cluster).map(|selector| Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(selector),
            ..Default::default()
        }),
        ..Default::default()
    });
    let tolerations = &cluster.spec.tolerations;
    DaemonSet {
        metadata: ObjectMeta {
            name: Some(VG_MANAGER_NAME.to_owned()),
            namespace: Some(world.settings.namespace.clone()),
            labels: Some(labels.clone()),
            owner_references: Some(vec![controller_owner_ref(cluster)]),
            ..Default::default()
        },
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                match_expressions: None,
            },
            // The API server's defaults, spelled out so readiness and drift checks see them.
            update_strategy: Some(DaemonSetUpdateStrategy {
                type_: Some("RollingUpdate".to_owned()),
                rolling_update: Some(RollingUpdateDaemonSet {
                    max_unavailable: Some(IntOrString::Int(1)),
                    max_surge: Some(IntOrString::Int(0)),
                }),
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    annotations: Some(BTreeMap::from([(
                        WORKLOAD_MANAGEMENT_ANNOTATION.to_owned(),
                        WORKLOAD_MANAGEMENT_VALUE.to_owned(),
                    )])),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    termination_grace_period_seconds: Some(30),
                    priority_class_name: priority_class(
                        &world.settings.vg_manager_priority_class,
                        &world.capabilities,
                    ),
                    volumes: Some(volumes),
                    containers: vec![container(world, mounts)],
                    host_pid: Some(true),
                    tolerations: (!tolerations.is_empty()).then(|| tolerations.clone()),
                    service_account_name: Some(VG_MANAGER_SERVICE_ACCOUNT.to_owned()),
                    affinity,
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

/// LVMS `VerifyDaemonSetReadiness`: a non-RollingUpdate strategy is always ready; otherwise every
/// desired pod must be updated and at least `desired - maxUnavailable` pods ready. maxUnavailable
/// may be a percentage (rounded up); an unusable value counts as `desired`.
pub fn daemonset_ready(ds: &DaemonSet) -> bool {
    let strategy = ds.spec.as_ref().and_then(|s| s.update_strategy.as_ref());
    if strategy.and_then(|s| s.type_.as_deref()) != Some("RollingUpdate") {
        return true;
    }
    // No status yet reads as Go's zero-valued one, as LVMS's check does.
    let status = ds.status.clone().unwrap_or_default();
    let desired = status.desired_number_scheduled;
    if status.updated_number_scheduled.unwrap_or(0) != desired {
        return false;
    }
    let max_unavailable = strategy
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.max_unavailable.as_ref())
        .and_then(|v| scaled_value(v, desired))
        .unwrap_or(desired);
    status.number_ready >= desired - max_unavailable
}

/// intstr `GetScaledValueFromIntOrPercent` with rounding up; None where it errors.
fn scaled_value(v: &IntOrString, total: i32) -> Option<i32> {
    match v {
        IntOrString::Int(i) => Some(*i),
        IntOrString::String(s) => {
            let percent: i64 = s.strip_suffix('%')?.parse().ok()?;
            let scaled = (percent as f64 * f64::from(total) / 100.0).ceil();
            // `as` saturates; out-of-range percentages are nonsense either way.
            Some(scaled as i32)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{LVMClusterSpec, Storage};
    use crate::operator::nodes::tests::{class, req, selector};
    use crate::operator::owner::tests::cluster_with;
    use crate::operator::world::OperatorSettings;
    use k8s_openapi::api::apps::v1::DaemonSetStatus;
    use k8s_openapi::api::core::v1::Toleration;

    fn world() -> World {
        World {
            settings: OperatorSettings {
                namespace: "openshift-lvm-storage".into(),
                image: "quay.io/lvms/lvms:v1".into(),
                vg_manager_command: vec!["/usr/bin/lvms".into(), "vg-manager".into()],
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn pod_spec(ds: &DaemonSet) -> &PodSpec {
        ds.spec.as_ref().unwrap().template.spec.as_ref().unwrap()
    }

    fn ds_for(classes: Vec<crate::api::DeviceClass>, tolerations: Vec<Toleration>) -> DaemonSet {
        let cluster = cluster_with(LVMClusterSpec {
            tolerations,
            storage: Storage {
                device_classes: classes,
            },
        });
        vg_manager_daemonset(&cluster, &world())
    }

    #[test]
    fn metadata_selector_and_owner() {
        let ds = ds_for(vec![class("vg1", None)], vec![]);
        assert_eq!(ds.metadata.name.as_deref(), Some("vg-manager"));
        assert_eq!(
            ds.metadata.namespace.as_deref(),
            Some("openshift-lvm-storage")
        );
        let labels = ds.metadata.labels.clone().unwrap();
        assert_eq!(labels["app.kubernetes.io/name"], "vg-manager");
        assert_eq!(labels["app.kubernetes.io/component"], "vg-manager");
        assert_eq!(labels["app.kubernetes.io/managed-by"], "lvms-operator");
        assert_eq!(labels["app.kubernetes.io/part-of"], "lvms-provisioner");
        let spec = ds.spec.as_ref().unwrap();
        assert_eq!(spec.selector.match_labels.as_ref(), Some(&labels));
        let tmpl_meta = spec.template.metadata.as_ref().unwrap();
        assert_eq!(tmpl_meta.labels.as_ref(), Some(&labels));
        assert_eq!(
            tmpl_meta.annotations.as_ref().unwrap()[WORKLOAD_MANAGEMENT_ANNOTATION],
            r#"{"effect": "PreferredDuringScheduling"}"#
        );
        let owners = ds.metadata.owner_references.as_ref().unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].kind, "LVMCluster");
        assert_eq!(owners[0].controller, Some(true));
        assert_eq!(owners[0].block_owner_deletion, Some(true));
    }

    #[test]
    fn the_priority_class_is_lvms_on_openshift_none_elsewhere_or_the_one_named() {
        let plain = Capabilities::default();
        let openshift = Capabilities {
            scc: true,
            ..Default::default()
        };
        let auto = PriorityClassChoice::Auto;
        assert_eq!(priority_class(&auto, &plain), None);
        assert_eq!(
            priority_class(&auto, &openshift).as_deref(),
            Some("openshift-user-critical")
        );
        let none: PriorityClassChoice = "none".parse().unwrap();
        assert_eq!(priority_class(&none, &openshift), None);
        let empty: PriorityClassChoice = "".parse().unwrap();
        assert_eq!(empty, PriorityClassChoice::None);
        let named: PriorityClassChoice = "system-node-critical".parse().unwrap();
        assert_eq!(
            priority_class(&named, &plain).as_deref(),
            Some("system-node-critical")
        );
        let mut w = world();
        w.capabilities.scc = true;
        let cluster = cluster_with(LVMClusterSpec {
            tolerations: vec![],
            storage: Storage {
                device_classes: vec![class("vg1", None)],
            },
        });
        let ds = vg_manager_daemonset(&cluster, &w);
        assert_eq!(
            pod_spec(&ds).priority_class_name.as_deref(),
            Some("openshift-user-critical")
        );
    }

    #[test]
    fn pod_runs_privileged_with_settings_image_and_command() {
        let ds = ds_for(vec![class("vg1", None)], vec![]);
        let pod = pod_spec(&ds);
        assert_eq!(pod.service_account_name.as_deref(), Some("vg-manager"));
        assert_eq!(
            pod.priority_class_name, None,
            "no OpenShift, no PriorityClass"
        );
        assert_eq!(pod.host_pid, Some(true));
        assert_eq!(pod.termination_grace_period_seconds, Some(30));
        assert!(pod.tolerations.is_none());
        let c = &pod.containers[0];
        assert_eq!(c.name, "vg-manager");
        assert_eq!(c.image.as_deref(), Some("quay.io/lvms/lvms:v1"));
        assert_eq!(
            c.command.as_deref(),
            Some(&["/usr/bin/lvms".to_owned(), "vg-manager".to_owned()][..])
        );
        let sc = c.security_context.as_ref().unwrap();
        assert_eq!(sc.privileged, Some(true));
        assert_eq!(sc.run_as_user, Some(0));
        let requests = c.resources.as_ref().unwrap().requests.as_ref().unwrap();
        assert_eq!(requests["cpu"].0, "5m");
        assert_eq!(requests["memory"].0, "45Mi");
        assert_eq!(
            c.termination_message_policy.as_deref(),
            Some("FallbackToLogsOnError")
        );
    }

    #[test]
    fn probes_use_lvms_thresholds_on_8081() {
        let ds = ds_for(vec![], vec![]);
        let c = &pod_spec(&ds).containers[0];
        let ports: Vec<_> = c
            .ports
            .as_ref()
            .unwrap()
            .iter()
            .map(|p| (p.name.as_deref(), p.container_port))
            .collect();
        // The probes on plain 8081; /metrics on 8443 (HTTPS, vg-manager-metrics-service).
        assert_eq!(ports, [(Some("healthz"), 8081), (Some("metrics"), 8443)]);
        let check = |p: &Option<Probe>, path: &str, f: i32, d: i32, t: i32, per: i32| {
            let p = p.as_ref().unwrap();
            let get = p.http_get.as_ref().unwrap();
            assert_eq!(get.path.as_deref(), Some(path));
            assert_eq!(get.port, IntOrString::String("healthz".into()));
            assert_eq!(
                (
                    p.failure_threshold,
                    p.initial_delay_seconds,
                    p.timeout_seconds,
                    p.period_seconds
                ),
                (Some(f), Some(d), Some(t), Some(per))
            );
        };
        check(&c.startup_probe, "/healthz", 60, 2, 2, 10);
        check(&c.liveness_probe, "/healthz", 3, 1, 1, 30);
        check(&c.readiness_probe, "/readyz", 3, 1, 1, 60);
    }

    #[test]
    fn env_has_downward_api_and_gomaxprocs() {
        let ds = ds_for(vec![], vec![]);
        let env = pod_spec(&ds).containers[0].env.clone().unwrap();
        let get = |n: &str| env.iter().find(|e| e.name == n).cloned().unwrap();
        assert_eq!(get("GOMAXPROCS").value.as_deref(), Some("2"));
        for (name, path) in [
            ("NODE_NAME", "spec.nodeName"),
            ("NAMESPACE", "metadata.namespace"),
            ("NAME", "metadata.name"),
        ] {
            let field = get(name).value_from.unwrap().field_ref.unwrap();
            assert_eq!(field.field_path, path, "{name}");
        }
    }

    #[test]
    fn volumes_and_mount_propagation() {
        let ds = ds_for(vec![], vec![]);
        let pod = pod_spec(&ds);
        let volumes = pod.volumes.as_ref().unwrap();
        let mounts = pod.containers[0].volume_mounts.as_ref().unwrap();
        assert_eq!(volumes.len(), 11);
        assert_eq!(mounts.len(), 11);
        let host = |name: &str| {
            let v = volumes.iter().find(|v| v.name == name).unwrap();
            v.host_path.clone().unwrap()
        };
        let mnt = |name: &str| mounts.iter().find(|m| m.name == name).unwrap().clone();
        assert_eq!(
            host("registration-dir").path,
            "/var/lib/kubelet/plugins_registry/"
        );
        assert_eq!(mnt("registration-dir").mount_path, "/registration");
        assert_eq!(
            host("node-plugin-dir").path,
            "/var/lib/kubelet/plugins/topolvm.io/node"
        );
        assert_eq!(mnt("node-plugin-dir").mount_path, "/run/topolvm");
        for bidi in ["csi-plugin-dir", "pod-volumes-dir"] {
            assert_eq!(
                mnt(bidi).mount_propagation.as_deref(),
                Some("Bidirectional")
            );
            assert_eq!(host(bidi).type_.as_deref(), Some("DirectoryOrCreate"));
        }
        assert_eq!(host("lvmd-config").path, "/etc/topolvm");
        assert_eq!(host("device-dir").type_.as_deref(), Some("Directory"));
        assert_eq!(host("run-udev").type_, None);
        for from_host in ["lvmd-config", "device-dir", "run-udev", "sys"] {
            assert_eq!(
                mnt(from_host).mount_propagation.as_deref(),
                Some("HostToContainer"),
                "{from_host}"
            );
        }
        assert_eq!(host("file-lock-dir").path, "/var/lock");
        // The journal outlives the container: a restart replays instead of starting empty.
        assert_eq!(host("journal-dir").path, "/var/lib/lvms");
        assert_eq!(
            host("journal-dir").type_.as_deref(),
            Some("DirectoryOrCreate")
        );
        assert_eq!(mnt("journal-dir").mount_path, "/var/lib/lvms");
        assert_eq!(mnt("journal-dir").read_only, None);
        let cert = volumes.iter().find(|v| v.name == "metrics-cert").unwrap();
        let secret = cert.secret.as_ref().unwrap();
        assert_eq!(
            secret.secret_name.as_deref(),
            Some("vg-manager-metrics-cert")
        );
        assert_eq!(secret.default_mode, Some(420));
        assert_eq!(
            secret.optional,
            Some(true),
            "pods must start on plain Kubernetes, where nothing creates the Secret"
        );
        assert_eq!(mnt("metrics-cert").read_only, Some(true));
    }

    #[test]
    fn tolerations_come_from_spec() {
        let tol = Toleration {
            key: Some("dedicated".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        };
        let ds = ds_for(vec![], vec![tol.clone()]);
        assert_eq!(pod_spec(&ds).tolerations, Some(vec![tol]));
    }

    #[test]
    fn affinity_ors_class_selector_terms() {
        let a = class("a", Some(selector(vec![vec![req("zone", "In", &["a"])]])));
        let b = class("b", Some(selector(vec![vec![req("zone", "In", &["b"])]])));
        let ds = ds_for(vec![a, b], vec![]);
        let terms = pod_spec(&ds)
            .affinity
            .as_ref()
            .unwrap()
            .node_affinity
            .as_ref()
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .as_ref()
            .unwrap()
            .node_selector_terms
            .clone();
        let values: Vec<_> = terms
            .iter()
            .map(|t| {
                t.match_expressions.as_ref().unwrap()[0]
                    .values
                    .clone()
                    .unwrap()
            })
            .collect();
        assert_eq!(values, [vec!["a".to_owned()], vec!["b".to_owned()]]);
    }

    #[test]
    fn class_without_selector_means_no_affinity() {
        let a = class("a", Some(selector(vec![vec![req("zone", "In", &["a"])]])));
        let ds = ds_for(vec![a, class("b", None)], vec![]);
        assert!(pod_spec(&ds).affinity.is_none());
    }

    fn ds_with(
        strategy: Option<DaemonSetUpdateStrategy>,
        desired: i32,
        updated: i32,
        ready: i32,
    ) -> DaemonSet {
        DaemonSet {
            spec: Some(DaemonSetSpec {
                update_strategy: strategy,
                ..Default::default()
            }),
            status: Some(DaemonSetStatus {
                desired_number_scheduled: desired,
                updated_number_scheduled: Some(updated),
                number_ready: ready,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn rolling(max_unavailable: Option<IntOrString>) -> Option<DaemonSetUpdateStrategy> {
        Some(DaemonSetUpdateStrategy {
            type_: Some("RollingUpdate".into()),
            rolling_update: Some(RollingUpdateDaemonSet {
                max_unavailable,
                max_surge: None,
            }),
        })
    }

    #[test]
    fn readiness_follows_lvms() {
        let one = || rolling(Some(IntOrString::Int(1)));
        // Updated must equal desired.
        assert!(!daemonset_ready(&ds_with(one(), 3, 2, 3)));
        // Ready >= desired - maxUnavailable.
        assert!(daemonset_ready(&ds_with(one(), 3, 3, 2)));
        assert!(!daemonset_ready(&ds_with(one(), 3, 3, 1)));
        // Percentages round up: 10% of 3 = 1.
        let pct = rolling(Some(IntOrString::String("10%".into())));
        assert!(daemonset_ready(&ds_with(pct.clone(), 3, 3, 2)));
        assert!(!daemonset_ready(&ds_with(pct, 3, 3, 1)));
        // An unusable maxUnavailable counts as desired.
        let bad = rolling(Some(IntOrString::String("lots".into())));
        assert!(daemonset_ready(&ds_with(bad, 3, 3, 0)));
        // OnDelete has nothing to wait for.
        let on_delete = Some(DaemonSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            rolling_update: None,
        });
        assert!(daemonset_ready(&ds_with(on_delete, 3, 0, 0)));
        // The desired object itself (no status yet) counts as ready, as in LVMS.
        let desired = ds_for(vec![], vec![]);
        assert!(daemonset_ready(&desired));
    }
}
