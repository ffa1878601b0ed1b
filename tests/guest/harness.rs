use lvms_testkit::guest::{Run, image, run};

/// The harness itself: the script runs as root on a kernel with device-mapper, sees its scratch
/// disk by serial, its files come back, and its exit status is the outcome's.
#[test]
fn a_script_runs_as_root_on_a_device_mapper_kernel_and_its_results_come_back() {
    let image = image();
    let script = r#"
set -eu
id -u > "$GUEST_OUT/uid"
uname -r > "$GUEST_OUT/release"
modprobe dm-mod
dmsetup version > "$GUEST_OUT/dm"
readlink -f /dev/disk/by-id/virtio-scratch-a > "$GUEST_OUT/disk"
blockdev --getsize64 /dev/disk/by-id/virtio-scratch-a > "$GUEST_OUT/size"
exit 3
"#;
    let out = run(image, &Run::new("harness", script).disk("scratch-a", 48));
    assert_eq!(
        out.status,
        3,
        "the script's own status; console:\n{}",
        out.tail(30)
    );
    assert_eq!(out.read("uid").trim(), "0");
    assert_eq!(out.read("release").trim(), image.release());
    assert!(
        out.read("dm").contains("Driver version"),
        "device-mapper answers in the guest: {}",
        out.read("dm")
    );
    assert!(
        out.read("disk").trim().starts_with("/dev/vd"),
        "{}",
        out.read("disk")
    );
    assert_eq!(out.read("size").trim(), (48u64 << 20).to_string());
}
