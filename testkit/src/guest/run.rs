//! One boot running one script: [`Run`] in, [`Outcome`] out.

use std::any::Any;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::boot::{Boot, boot};
use super::inputs::{Inputs, WithInputs};
use super::{Image, tail};

/// What one guest boot runs.
#[derive(Debug, Clone)]
pub struct Run {
    /// Shown in the console prefix and the work directory's name.
    pub name: String,
    /// Run by dash as root in /work, with `GUEST_OUT` naming the directory brought back.
    pub script: String,
    /// Files, executables and forwards ([`WithInputs`] adds them).
    pub inputs: Inputs,
    /// Scratch disks: serial (appears as /dev/disk/by-id/virtio-SERIAL; 20 bytes at most) and
    /// size in MiB.
    pub disks: Vec<(String, u64)>,
    pub timeout: Duration,
    pub memory_mib: u64,
    /// vCPUs. One by default: under multi-threaded TCG a 6.12 guest with two vCPUs panicked at
    /// boot once in CI (`int3` in `sched_clock_cpu` while the kernel patched its own text on the
    /// other vCPU).
    pub cpus: u32,
}

impl WithInputs for Run {
    fn inputs_mut(&mut self) -> &mut Inputs {
        &mut self.inputs
    }
}

impl Run {
    pub fn new(name: &str, script: &str) -> Self {
        Self {
            name: name.into(),
            script: script.into(),
            inputs: Inputs::default(),
            disks: Vec::new(),
            timeout: Duration::from_secs(300),
            memory_mib: 1024,
            cpus: 1,
        }
    }
    pub fn disk(mut self, serial: &str, mib: u64) -> Self {
        self.disks.push((serial.into(), mib));
        self
    }
}

/// How a script ended.
#[derive(Debug)]
pub struct Outcome {
    /// The script's exit status.
    pub status: i32,
    /// The group job this is the outcome of (its console lines are prefixed `[job]`).
    pub job: Option<String>,
    /// The guest's whole console (in a group: every job's lines).
    pub console: String,
    /// What the script left in `$GUEST_OUT`, unpacked (kept while the outcome lives).
    pub out: PathBuf,
    /// Boot to the script's end.
    pub elapsed: Duration,
    pub(crate) _work: Arc<dyn Any + Send + Sync>,
}

impl Outcome {
    /// The last `n` console lines (of this job, in a group), for failure messages.
    pub fn tail(&self, n: usize) -> String {
        match &self.job {
            Some(job) => {
                let prefix = format!("[{job}] ");
                let mine: Vec<&str> = self
                    .console
                    .lines()
                    .filter(|l| l.contains(&prefix))
                    .collect();
                tail(&mine.join("\n"), n)
            }
            None => tail(&self.console, n),
        }
    }
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.out.join(name)).unwrap_or_else(|e| {
            panic!(
                "the guest left no {name} in $GUEST_OUT ({e}); console:\n{}",
                self.tail(40)
            )
        })
    }
}

/// Boots the guest, runs the script, and returns how it ended. The console is streamed to the
/// test's output as it comes (prefixed with the run's name); a boot that does not finish within
/// the timeout fails the test with the console's last lines.
pub fn run(image: &Image, spec: &Run) -> Outcome {
    let work = tempfile::Builder::new()
        .prefix(&format!("lvms-guest-{}-", spec.name))
        .tempdir()
        .expect("guest work dir");
    let input = work.path().join("in");
    std::fs::create_dir_all(&input).expect("mkdir in");
    std::fs::write(input.join("run.sh"), &spec.script).expect("write run.sh");
    spec.inputs.stage(&input).unwrap_or_else(|e| panic!("{e}"));
    let b = Boot {
        name: &spec.name,
        work: work.path(),
        input: &input,
        disks: &spec.disks,
        forwards: &spec.inputs.forwards,
        timeout: spec.timeout,
        memory_mib: spec.memory_mib,
        cpus: spec.cpus,
    };
    let name = spec.name.clone();
    let booted = boot(image, &b, &mut |line| println!("[guest {name}] {line}"))
        .unwrap_or_else(|e| panic!("{e}"));
    Outcome {
        status: booted.status,
        job: None,
        console: booted.console,
        out: booted.out,
        elapsed: booted.elapsed,
        _work: Arc::new(work),
    }
}
