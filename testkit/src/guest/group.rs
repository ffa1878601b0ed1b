//! One guest for a whole test group. Each scenario (a [`Member`]) prepares its host side, then
//! submits its [`Job`]: a script and its own scratch disks. Once every member has submitted (or
//! dropped out), the guest boots once and runs all jobs side by side, each in `/work/<job>`
//! with `GUEST_OUT=/out/<job>`; a job's exit is seen on the console the moment it happens
//! (`LVMS-JOB-EXIT <job> <status>`), and so is any mark it sets for its host side
//! (`LVMS-JOB-MARK <job> <mark>`, e.g. "ready for teardown"). Its files come back at its exit,
//! not at power-off: each job has an output disk of its own (serial `<job>-out`) that the guest
//! writes a tar onto and flushes before it reports the exit, so a scenario can check its job
//! while the others still run.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::Image;
use super::boot::{Boot, boot};
use super::inputs::{Inputs, WithInputs};
use super::run::Outcome;

/// What every job of the group shares: files and binaries in /work, forwards, limits.
#[derive(Debug, Clone)]
pub struct GroupSpec {
    pub name: String,
    /// [`WithInputs`] adds them.
    pub inputs: Inputs,
    pub timeout: Duration,
    pub memory_mib: u64,
    /// One vCPU: see [`super::Run::cpus`].
    pub cpus: u32,
}

impl GroupSpec {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.into(),
            inputs: Inputs::default(),
            timeout: Duration::from_secs(900),
            memory_mib: 2048,
            cpus: 1,
        }
    }
}

impl WithInputs for GroupSpec {
    fn inputs_mut(&mut self) -> &mut Inputs {
        &mut self.inputs
    }
}

/// One scenario's part of the boot.
#[derive(Debug, Clone)]
pub struct Job {
    /// A directory name in the guest and the console prefix.
    pub name: String,
    /// Run by dash as root in /work/<name> (shared files are in /work).
    pub script: String,
    /// Scratch disks (serial, MiB); serials are unique across the group.
    pub disks: Vec<(String, u64)>,
}

impl Job {
    pub fn new(name: &str, script: &str) -> Self {
        Self {
            name: name.into(),
            script: script.into(),
            disks: Vec::new(),
        }
    }
    pub fn disk(mut self, serial: &str, mib: u64) -> Self {
        self.disks.push((serial.into(), mib));
        self
    }
}

/// A guest shared by `members` scenarios.
#[derive(Clone)]
pub struct Group(Arc<Inner>);

struct Inner {
    image: Image,
    spec: GroupSpec,
    members: usize,
    pending: Mutex<Pending>,
    state: watch::Sender<State>,
}

#[derive(Default)]
struct Pending {
    jobs: Vec<Job>,
    settled: usize,
}

#[derive(Default)]
struct State {
    /// Job → (status, time since boot) as the console reported it.
    exits: BTreeMap<String, (i32, Duration)>,
    /// (job, mark) pairs the console reported.
    marks: BTreeSet<(String, String)>,
    /// The boot's work directory (disk images, console), from the boot's start; it lives as
    /// long as any outcome does.
    work: Option<Arc<tempfile::TempDir>>,
    /// The guest powered off (or never booted: the error).
    end: Option<Result<(), String>>,
}

impl Group {
    pub fn new(image: Image, spec: GroupSpec, members: usize) -> Self {
        Self(Arc::new(Inner {
            image,
            spec,
            members,
            pending: Mutex::default(),
            state: watch::Sender::new(State::default()),
        }))
    }

    /// A scenario's place in the group: submit its job, or drop it (a scenario that failed
    /// before its job was ready) so the others still boot.
    pub fn member(&self) -> Member {
        Member {
            group: self.clone(),
            settled: false,
        }
    }

    fn settle(&self, job: Option<Job>) {
        let jobs = {
            let mut p = self.0.pending.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(job) = job {
                assert!(
                    p.jobs.iter().all(|j| j.name != job.name),
                    "two jobs named {} in group {}",
                    job.name,
                    self.0.spec.name
                );
                p.jobs.push(job);
            }
            p.settled += 1;
            if p.settled != self.0.members {
                return;
            }
            std::mem::take(&mut p.jobs)
        };
        let group = self.clone();
        std::thread::spawn(move || {
            let end = group.boot(jobs);
            group.0.state.send_modify(|s| s.end = Some(end));
        });
    }

    fn boot(&self, jobs: Vec<Job>) -> Result<(), String> {
        let spec = &self.0.spec;
        if jobs.is_empty() {
            return Err(format!("no job of group {} was submitted", spec.name));
        }
        let work = Arc::new(
            tempfile::Builder::new()
                .prefix(&format!("lvms-guest-{}-", spec.name))
                .tempdir()
                .map_err(|e| format!("guest work dir: {e}"))?,
        );
        self.0.state.send_modify(|s| s.work = Some(work.clone()));
        let input = work.path().join("in");
        std::fs::create_dir_all(&input).map_err(|e| format!("mkdir in: {e}"))?;
        spec.inputs.stage(&input)?;
        let mut disks: Vec<(String, u64)> = Vec::new();
        for job in &jobs {
            let dir = input.join(&job.name);
            std::fs::create_dir_all(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
            std::fs::write(dir.join("run.sh"), &job.script)
                .map_err(|e| format!("write {}/run.sh: {e}", job.name))?;
            for d in job.disks.iter().chain([&(out_serial(&job.name), OUT_MIB)]) {
                if disks.iter().any(|(s, _)| *s == d.0) {
                    return Err(format!("disk serial {} is used by two jobs", d.0));
                }
                disks.push(d.clone());
            }
        }
        std::fs::write(input.join("run.sh"), group_script(&jobs))
            .map_err(|e| format!("write run.sh: {e}"))?;
        let b = Boot {
            name: &spec.name,
            work: work.path(),
            input: &input,
            disks: &disks,
            forwards: &spec.inputs.forwards,
            timeout: spec.timeout,
            memory_mib: spec.memory_mib,
            cpus: spec.cpus,
        };
        let started = Instant::now();
        let state = &self.0.state;
        let name = spec.name.clone();
        // Every job's exit was reported before guest-init's own; its own marker says nothing
        // more (the group script always ends 0).
        boot(&self.0.image, &b, &mut |line| {
            println!("[guest {name}] {line}");
            if let Some((job, status)) = job_exit(line) {
                state.send_modify(|s| {
                    s.exits.insert(job, (status, started.elapsed()));
                });
            } else if let Some(mark) = job_mark(line) {
                state.send_modify(|s| {
                    s.marks.insert(mark);
                });
            }
        })?;
        Ok(())
    }
}

/// Each job's output disk: a tar of its `$GUEST_OUT`.
const OUT_MIB: u64 = 64;

fn out_serial(job: &str) -> String {
    format!("{job}-out")
}

/// The guest's /work/run.sh: every job at once, its output prefixed with its name, its exit
/// marker written straight to the console (not through the prefixing pipe, which may lag).
/// A job sets a mark with `echo "LVMS-JOB-MARK $JOB <mark>" >/dev/console`.
fn group_script(jobs: &[Job]) -> String {
    let mut s = String::from(
        r#"job() {
  mkdir -p "/out/$1"
  { ( cd "/work/$1" && JOB=$1 GUEST_OUT="/out/$1" /usr/bin/dash ./run.sh </dev/null 2>&1 )
    rc=$?
    # The job's files onto its own disk, flushed, before the host hears of the exit.
    tar -cf "/dev/disk/by-id/virtio-$1-out" -C "/out/$1" . && sync || rc=124
    echo "LVMS-JOB-EXIT $1 $rc" >/dev/console; } | sed "s/^/[$1] /"
}
"#,
    );
    for j in jobs {
        let _ = writeln!(s, "job {} &", j.name);
    }
    s.push_str("wait\n");
    s
}

/// `LVMS-JOB-EXIT <job> <status>` anywhere in a console line.
fn job_exit(line: &str) -> Option<(String, i32)> {
    let rest = line.split("LVMS-JOB-EXIT ").nth(1)?;
    let mut words = rest.split_whitespace();
    let job = words.next()?.to_string();
    let status = words.next()?.parse().ok()?;
    Some((job, status))
}

/// `LVMS-JOB-MARK <job> <mark>` anywhere in a console line.
fn job_mark(line: &str) -> Option<(String, String)> {
    let rest = line.split("LVMS-JOB-MARK ").nth(1)?;
    let mut words = rest.split_whitespace();
    Some((words.next()?.to_string(), words.next()?.to_string()))
}

/// A scenario's handle before it submits; dropping it unsubmitted withdraws the scenario.
pub struct Member {
    group: Group,
    settled: bool,
}

impl Member {
    /// Hands the job over; the guest boots when the last member has submitted or withdrawn.
    pub fn submit(mut self, job: Job) -> JobHandle {
        self.settled = true;
        let name = job.name.clone();
        self.group.settle(Some(job));
        JobHandle {
            group: self.group.clone(),
            name,
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        if !self.settled {
            self.group.settle(None);
        }
    }
}

/// A submitted job: wait for its exit, then for the group's end to read its files.
pub struct JobHandle {
    group: Group,
    pub name: String,
}

impl JobHandle {
    /// The job's exit status, as soon as the guest reports it. Panics (with the console) when
    /// the guest ended without running it to the end.
    pub async fn exited(&self) -> i32 {
        let mut rx = self.group.0.state.subscribe();
        loop {
            {
                let s = rx.borrow_and_update();
                if let Some((status, _)) = s.exits.get(&self.name) {
                    return *status;
                }
                if let Some(end) = &s.end {
                    self.ended_without_exit(end);
                }
            }
            if rx.changed().await.is_err() {
                panic!("group {} is gone", self.group.0.spec.name);
            }
        }
    }

    /// Waits until the job sets `mark`. Panics when it exits (or the guest ends) without it.
    pub async fn mark(&self, mark: &str) {
        let mut rx = self.group.0.state.subscribe();
        let key = (self.name.clone(), mark.to_string());
        loop {
            {
                let s = rx.borrow_and_update();
                if s.marks.contains(&key) {
                    return;
                }
                if let Some((status, _)) = s.exits.get(&self.name) {
                    panic!(
                        "job {} exited (status {status}) without setting {mark}: see its [{}] console lines",
                        self.name, self.name
                    );
                }
                if let Some(end) = &s.end {
                    self.ended_without_exit(end);
                }
            }
            if rx.changed().await.is_err() {
                panic!("group {} is gone", self.group.0.spec.name);
            }
        }
    }

    /// The job's outcome as soon as it has exited: its status and its `$GUEST_OUT`, read
    /// from its output disk (the other jobs may still be running).
    pub async fn outcome(&self) -> Outcome {
        let status = self.exited().await;
        let (work, elapsed) = {
            let s = self.group.0.state.borrow();
            let work = s.work.clone().expect("a job exited, so the guest booted");
            (work, s.exits[&self.name].1)
        };
        let out = work.path().join(format!("out-{}", self.name));
        std::fs::create_dir_all(&out).expect("mkdir job out");
        let img = work.path().join(format!("{}.img", out_serial(&self.name)));
        let untar = std::process::Command::new("tar")
            .arg("-xf")
            .arg(&img)
            .arg("-C")
            .arg(&out)
            .output()
            .expect("tar -x");
        assert!(
            untar.status.success(),
            "reading job {}'s output disk: {}",
            self.name,
            String::from_utf8_lossy(&untar.stderr)
        );
        let console = std::fs::read_to_string(work.path().join("console.log")).unwrap_or_default();
        Outcome {
            status,
            job: Some(self.name.clone()),
            console,
            out,
            elapsed,
            _work: work,
        }
    }

    fn ended_without_exit(&self, end: &Result<(), String>) -> ! {
        match end {
            Err(e) => panic!("job {}: {e}", self.name),
            Ok(()) => panic!(
                "the guest powered off before job {} ended: see the console above",
                self.name
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_exits_are_read_from_console_lines() {
        assert_eq!(job_exit("LVMS-JOB-EXIT thin 0"), Some(("thin".into(), 0)));
        assert_eq!(
            job_exit("[  3.1] LVMS-JOB-EXIT raid-5 137"),
            Some(("raid-5".into(), 137))
        );
        assert_eq!(job_exit("[thin] LVMS-JOB-EXIT thin"), None);
        assert_eq!(job_exit("guest: LVMS-GUEST-EXIT 0"), None);
        assert_eq!(
            job_mark("LVMS-JOB-MARK thin teardown"),
            Some(("thin".into(), "teardown".into()))
        );
        assert_eq!(job_mark("LVMS-JOB-MARK thin"), None);
    }

    #[test]
    fn the_group_script_starts_every_job_and_waits() {
        let s = group_script(&[Job::new("a", "true"), Job::new("b", "true")]);
        assert!(s.contains("job a &\njob b &\nwait\n"), "{s}");
    }
}
