# The `after_ready` of the csi-sanity scenarios (tests/guest/sanity.rs), run by node.sh once
# the class is Ready: csi-sanity's suite against vg-manager's node socket (here, where its
# mounts are) and the operator's controller socket (on the host, through the group's relay),
# its junit report, log and exit status recorded; then how many of its mounts are left.
#
# Variables (sanity.rs exports them):
#   SANITY_TAG    thick or thin: names the files under /tmp and $GUEST_OUT
#   SANITY_CLASS  the device class the suite's volumes ask for
#   SANITY_SKIP   a --ginkgo.skip regex, or empty: nothing skipped
#   CONTROLLER    the operator's CSI controller as the guest dials it (host:port)
#   VGM (node.sh's), GUEST_OUT
# Functions:      watch, unwatch (node.sh's)
printf 'topolvm.io/device-class: %s\n' "$SANITY_CLASS" >"/tmp/sanity-$SANITY_TAG.yaml"
mkdir -p "/tmp/sanity-$SANITY_TAG"
san() {
  /work/csi-sanity --csi.endpoint="$VGM/csi.sock" \
    --csi.controllerendpoint="$CONTROLLER" \
    --csi.testvolumeparameters="/tmp/sanity-$SANITY_TAG.yaml" \
    --csi.testvolumesize=$((64 << 20)) --csi.testvolumeexpandsize=$((128 << 20)) \
    --csi.mountdir="/tmp/sanity-$SANITY_TAG/mount" --csi.stagingdir="/tmp/sanity-$SANITY_TAG/stage" "$@"
}
# The operator places a volume only on a node whose capacity annotation it has seen, which
# vg-manager writes after the pass that made the class Ready: the suite starts once one real
# CreateVolume (its own spec) succeeds, so its first specs do not race that annotation.
i=0
until san '--ginkgo.focus=CreateVolume should return appropriate values SingleNodeWriter NoCapacity' \
    >"$GUEST_OUT/sanity-$SANITY_TAG-first.log" 2>&1; do
  i=$((i+1)); [ $i -ge 30 ] && break; sleep 2
done
echo "$i" >"$GUEST_OUT/sanity-$SANITY_TAG-waits"
# With the suite's last lines (watch evals its argument then, so it stays unexpanded here).
# shellcheck disable=SC2016
watch 'tail -n 2 "$GUEST_OUT/sanity-$SANITY_TAG.log" | cut -c1-200'
san --ginkgo.junit-report="$GUEST_OUT/junit-$SANITY_TAG.xml" --ginkgo.v \
  ${SANITY_SKIP:+"--ginkgo.skip=$SANITY_SKIP"} >"$GUEST_OUT/sanity-$SANITY_TAG.log" 2>&1
echo $? >"$GUEST_OUT/sanity-$SANITY_TAG.status"
unwatch
grep -c " /tmp/sanity-" /proc/self/mountinfo >"$GUEST_OUT/mounts-left" || true
