//! A fake [`HostOps`] for unit tests of the volume-group actor: commands answered from
//! lvm2-format fixtures (by program name), files in memory, every call recorded. It never
//! touches the real filesystem.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;

use super::host::{HostError, HostOps, HostOutput, program_name};

/// One scripted answer to a command.
#[derive(Debug, Clone)]
pub enum Answer {
    Stdout(String),
    /// Exit code and stderr.
    Fails(i32, String),
}

#[derive(Default)]
struct State {
    /// Per program (argv[0]'s file name): answers in order; the last one repeats.
    answers: BTreeMap<String, VecDeque<Answer>>,
    calls: Vec<Vec<String>>,
    files: BTreeMap<PathBuf, String>,
    mounts: String,
    /// Block device nodes: path → `major:minor`.
    devices: BTreeMap<PathBuf, String>,
}

#[derive(Default)]
pub struct FakeHost(Mutex<State>);

fn program(argv: &[String]) -> String {
    program_name(argv).unwrap_or_default()
}

impl FakeHost {
    /// Queue answers for `program` (`pvs`, `vgcreate`, ...); the last one keeps answering.
    pub fn answer(&self, program: &str, answers: impl IntoIterator<Item = Answer>) -> &Self {
        self.0
            .lock()
            .unwrap()
            .answers
            .insert(program.into(), answers.into_iter().collect());
        self
    }

    pub fn stdout(&self, program: &str, text: impl Into<String>) -> &Self {
        self.answer(program, [Answer::Stdout(text.into())])
    }

    /// Every command run, in order.
    pub fn calls(&self) -> Vec<Vec<String>> {
        self.0.lock().unwrap().calls.clone()
    }

    /// The programs run, in order, leaving out the read-only reports.
    pub fn mutations(&self) -> Vec<String> {
        const READS: [&str; 6] = ["lsblk", "blkid", "pvs", "vgs", "lvs", "losetup"];
        self.calls()
            .iter()
            .map(|c| program(c))
            .filter(|p| !READS.contains(&p.as_str()))
            .collect()
    }

    /// The node's mount table from now on (`mountinfo` lines).
    pub fn mounts(&self, table: impl Into<String>) -> &Self {
        self.0.lock().unwrap().mounts = table.into();
        self
    }

    /// A block device node at `path` with `number` (`major:minor`).
    pub fn block_device(&self, path: &str, number: &str) -> &Self {
        self.0
            .lock()
            .unwrap()
            .devices
            .insert(path.into(), number.into());
        self
    }

    pub fn file(&self, path: &Path) -> Option<String> {
        self.0.lock().unwrap().files.get(path).cloned()
    }
}

impl HostOps for FakeHost {
    fn run<'a>(
        &'a self,
        cmd: &'a [String],
        ok_codes: &'a [i32],
    ) -> BoxFuture<'a, Result<HostOutput, HostError>> {
        let answer = {
            let mut s = self.0.lock().unwrap();
            s.calls.push(cmd.to_vec());
            let q = s.answers.entry(program(cmd)).or_default();
            if q.len() > 1 {
                q.pop_front()
            } else {
                q.front().cloned()
            }
        };
        let argv = cmd.join(" ");
        Box::pin(async move {
            let out = |code, stdout: String, stderr: String| HostOutput {
                code,
                stdout,
                stderr,
                took: Duration::from_millis(1),
            };
            match answer {
                // Unscripted commands succeed silently (mutations: vgcreate, pvremove, ...).
                None => Ok(out(0, String::new(), String::new())),
                Some(Answer::Stdout(s)) => Ok(out(0, s, String::new())),
                Some(Answer::Fails(code, stderr)) if ok_codes.contains(&code) => {
                    Ok(out(code, String::new(), stderr))
                }
                Some(Answer::Fails(code, stderr)) => Err(HostError::Failed { argv, code, stderr }),
            }
        })
    }

    fn canonicalize(&self, _path: &Path) -> io::Result<PathBuf> {
        // No selector path exists on the fake node (these tests select nothing by path).
        Err(io::ErrorKind::NotFound.into())
    }

    fn read_dir_names(&self, _dir: &Path) -> io::Result<Vec<String>> {
        // No device is held by anything.
        Ok(Vec::new())
    }

    fn read_to_string(&self, path: &Path) -> io::Result<String> {
        self.file(path)
            .ok_or_else(|| io::ErrorKind::NotFound.into())
    }

    fn write_atomic(&self, path: &Path, text: &str, _mode: u32) -> io::Result<()> {
        self.0
            .lock()
            .unwrap()
            .files
            .insert(path.to_path_buf(), text.to_string());
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.0.lock().unwrap().files.remove(path);
        Ok(())
    }

    /// Nothing is mounted on the fake node unless a test says so.
    fn mount_table(&self) -> io::Result<String> {
        Ok(self.0.lock().unwrap().mounts.clone())
    }

    /// A device a test made; a file or a directory of the fake is none; anything else is not there.
    fn block_device_number(&self, path: &Path) -> io::Result<Option<String>> {
        let s = self.0.lock().unwrap();
        match s.devices.get(path) {
            Some(n) => Ok(Some(n.clone())),
            None if s.files.contains_key(path) => Ok(None),
            None => Err(io::ErrorKind::NotFound.into()),
        }
    }

    /// Targets are files in memory too (a directory is an empty entry).
    fn make_target(&self, path: &Path, _dir: bool) -> io::Result<()> {
        self.0
            .lock()
            .unwrap()
            .files
            .entry(path.to_path_buf())
            .or_default();
        Ok(())
    }

    fn remove_target(&self, path: &Path) -> io::Result<bool> {
        Ok(self.0.lock().unwrap().files.remove(path).is_some())
    }

    fn set_mode(&self, _path: &Path, _mode: u32) -> io::Result<()> {
        Ok(())
    }
}
