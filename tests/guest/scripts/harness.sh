# The harness's own contract (tests/guest/harness.rs): the job runs as root in its own
# directory on a kernel with device-mapper, sees its scratch disk by serial, sets a mark, and
# its files and its exit status (3) come back.
#
# Variables:
#   DISK            the scratch disk's /dev/disk/by-id path (harness.rs exports it)
#   JOB, GUEST_OUT  the group's (testkit/src/guest/group.rs): the job's name, its output dir
set -eu
id -u > "$GUEST_OUT/uid"
uname -r > "$GUEST_OUT/release"
pwd > "$GUEST_OUT/cwd"
modprobe dm-mod
dmsetup version > "$GUEST_OUT/dm"
readlink -f "$DISK" > "$GUEST_OUT/disk"
blockdev --getsize64 "$DISK" > "$GUEST_OUT/size"
echo "LVMS-JOB-MARK $JOB checked" >/dev/console
exit 3
