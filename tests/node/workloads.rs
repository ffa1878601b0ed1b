//! The objects the scenarios create, as a user writes them: claims, Pods that check what they
//! see and report it in their termination message, and the probe that looks at the node.

use serde_json::{Value, json};

use crate::ctx::APPS;

/// A ReadWriteOnce claim of `mib` MiB in StorageClass `sc` (`block`: volumeMode Block).
pub fn pvc(name: &str, sc: &str, mib: u64, block: bool) -> Value {
    json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": APPS},
        "spec": {
            "storageClassName": sc,
            "accessModes": ["ReadWriteOnce"],
            "volumeMode": if block { "Block" } else { "Filesystem" },
            "resources": {"requests": {"storage": format!("{mib}Mi")}}
        }
    })
}

/// A claim restored from VolumeSnapshot `snapshot`.
pub fn pvc_from_snapshot(name: &str, sc: &str, mib: u64, snapshot: &str) -> Value {
    let mut p = pvc(name, sc, mib, false);
    p["spec"]["dataSource"] = json!({
        "apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": snapshot
    });
    p
}

/// The workload image (Debian's busybox-static, imported into the node's containerd).
pub const BUSYBOX: &str = "localhost/busybox:dev";

/// A Pod that runs `script` once with claim `claim` at /data (or, `block`, as /dev/xvda); the
/// script's stdout is the Pod's termination message, and a failing script fails the Pod. Runs
/// as user 1000 with `fsGroup` 2000 (filesystem claims).
pub fn pod(name: &str, claim: &str, block: bool, script: &str) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": APPS},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000},
            "containers": [{
                "name": "app", "image": BUSYBOX, "imagePullPolicy": "Never",
                "command": ["sh", "-c", reporting(script)],
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        }
    });
    if block {
        // Raw block devices are root's: the Pod runs as root there.
        p["spec"]["securityContext"] = json!({});
        p["spec"]["containers"][0]["volumeDevices"] =
            json!([{"name": "data", "devicePath": "/dev/xvda"}]);
    } else {
        p["spec"]["containers"][0]["volumeMounts"] =
            json!([{"name": "data", "mountPath": "/data"}]);
    }
    p
}

/// `script`, its stdout and stderr going to the termination message (and failing the Pod
/// when it fails).
fn reporting(script: &str) -> String {
    format!(
        "set -e\n( {script} ) >/dev/termination-log 2>&1 || {{ rc=$?; echo \"exit $rc\" >>/dev/termination-log; exit $rc; }}"
    )
}

/// A Pod with a generic ephemeral volume of `mib` MiB in `sc`, running `script` as [`pod`] does.
pub fn ephemeral_pod(name: &str, sc: &str, mib: u64, script: &str) -> Value {
    let mut p = pod(name, "unused", false, script);
    p["spec"]["volumes"] = json!([{
        "name": "data",
        "ephemeral": {"volumeClaimTemplate": {"spec": {
            "storageClassName": sc,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": format!("{mib}Mi")}}
        }}}
    }]);
    p
}

/// A privileged Pod on the node running `script` in the node's own namespaces (nsenter into
/// PID 1: the node's lvm2, mounts and device-mapper), with the lvms image's util-linux. Its
/// output is the termination message (4 KiB at most: keep scripts terse).
pub fn node_probe(name: &str, script: &str) -> Value {
    let outer = format!(
        "nsenter -t 1 -m -u -i -n -p -- sh -c '{}' >/dev/termination-log 2>&1",
        script.replace('\'', r"'\''")
    );
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": APPS},
        "spec": {
            "restartPolicy": "Never",
            "hostPID": true,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "probe", "image": "localhost/lvms:dev", "imagePullPolicy": "Never",
                "command": ["sh", "-c", outer],
                "securityContext": {"privileged": true, "runAsUser": 0}
            }]
        }
    })
}
