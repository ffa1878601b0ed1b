//! The kernel's mount table (`/proc/self/mountinfo`, read in the node's mount namespace) as
//! the node service needs it: what is mounted at a target, from which device, read-only or not.
//! A line that does not parse makes the whole table an error: a mount never seen is never
//! taken for "not mounted".

/// One mount (`proc(5)`, mountinfo).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// `major:minor` of the mounted filesystem's device (`st_dev`).
    pub device: String,
    /// The path inside that filesystem mounted here (`/` for a whole filesystem; a bind mount
    /// of a device node shows the node's path in devtmpfs).
    pub root: String,
    pub mount_point: String,
    pub options: Vec<String>,
    pub fs_type: String,
    pub source: String,
}

impl Mount {
    pub fn read_only(&self) -> bool {
        self.options.iter().any(|o| o == "ro")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mountinfo line {line}: {why}: {text:?}")]
pub struct MountinfoError {
    pub line: usize,
    pub why: &'static str,
    pub text: String,
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                let v = d.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parse a whole table.
pub fn parse(text: &str) -> Result<Vec<Mount>, MountinfoError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            parse_line(l).map_err(|why| MountinfoError {
                line: n + 1,
                why,
                text: l.to_string(),
            })
        })
        .collect()
}

fn parse_line(line: &str) -> Result<Mount, &'static str> {
    let fields: Vec<&str> = line.split(' ').collect();
    let sep = fields
        .iter()
        .position(|f| *f == "-")
        .ok_or("no ` - ` separator")?;
    if sep < 6 || fields.len() < sep + 3 {
        return Err("too few fields");
    }
    if !fields[2].contains(':') {
        return Err("field 3 is not major:minor");
    }
    let mut options: Vec<String> = fields[5].split(',').map(String::from).collect();
    // Superblock options (`ro` of a read-only filesystem) count too.
    options.extend(
        fields
            .get(sep + 3)
            .map(|s| s.split(',').map(String::from).collect::<Vec<_>>())
            .unwrap_or_default(),
    );
    Ok(Mount {
        device: fields[2].to_string(),
        root: unescape(fields[3]),
        mount_point: unescape(fields[4]),
        options,
        fs_type: fields[sep + 1].to_string(),
        source: unescape(fields[sep + 2]),
    })
}

/// The mount visible at `path` (the last one mounted there: mounts stack).
pub fn at<'a>(mounts: &'a [Mount], path: &str) -> Option<&'a Mount> {
    let path = path.trim_end_matches('/');
    mounts
        .iter()
        .rev()
        .find(|m| m.mount_point.trim_end_matches('/') == path)
}

/// How many mounts are stacked at `path` (a publish that mounted twice shows 2).
pub fn count_at(mounts: &[Mount], path: &str) -> usize {
    let path = path.trim_end_matches('/');
    mounts
        .iter()
        .filter(|m| m.mount_point.trim_end_matches('/') == path)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
22 1 0:21 / / rw,relatime - tmpfs rootfs rw
35 22 254:3 / /var/lib/kubelet/pods/p1/volumes/kubernetes.io~csi/pvc-1/mount rw,relatime - xfs /dev/mapper/vg1-abc rw,attr2,nouuid
36 22 0:5 /dm-4 /var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-2/p2 rw,nosuid - devtmpfs udev rw,size=4k
37 22 254:5 / /mnt/with\\040space ro,relatime - ext4 /dev/mapper/vg1-def rw
";

    #[test]
    fn a_table_gives_device_root_point_options_type_and_source() {
        let m = parse(TABLE).unwrap();
        assert_eq!(m.len(), 4);
        assert_eq!(m[1].device, "254:3");
        assert_eq!(m[1].fs_type, "xfs");
        assert_eq!(m[1].source, "/dev/mapper/vg1-abc");
        assert!(m[1].options.contains(&"nouuid".to_string()));
        assert!(!m[1].read_only());
        assert_eq!(m[2].root, "/dm-4", "a bind-mounted device node");
        assert_eq!(m[3].mount_point, "/mnt/with space");
        assert!(m[3].read_only());
    }

    #[test]
    fn the_mount_at_a_path_is_the_top_of_its_stack() {
        let mut text = TABLE.to_string();
        text.push_str("40 22 254:9 / /mnt/with\\040space rw - ext4 /dev/x rw\n");
        let m = parse(&text).unwrap();
        assert_eq!(at(&m, "/mnt/with space/").unwrap().device, "254:9");
        assert_eq!(count_at(&m, "/mnt/with space"), 2);
        assert_eq!(at(&m, "/mnt/other"), None);
    }

    #[test]
    fn a_line_that_does_not_parse_fails_the_table() {
        let e = parse("22 1 0:21 / / rw,relatime tmpfs rootfs rw\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.why.contains("separator"), "{e}");
        assert!(parse("22 1 zero / / rw - tmpfs x rw").is_err());
    }
}
