# The `prepare` of the wipe scenario (tests/guest/wipe.rs), run by node.sh before vg-manager
# starts: a linear dm device over the disk's first MiB, so the disk has a holder. No udev in
# the guest: dmsetup makes the /dev/mapper node itself, as udev would on a node.
#
# Variables:
#   WIPE_DISK  the disk's /dev/disk/by-id path (wipe.rs exports it)
#   GUEST_OUT  the job's output directory
disk=$(readlink -f "$WIPE_DISK")
echo "0 2048 linear $disk 0" | dmsetup create --noudevsync lvmstest-child
dmsetup mknodes
ls "/sys/class/block/${disk#/dev/}/holders" >"$GUEST_OUT/holders-before.txt"
