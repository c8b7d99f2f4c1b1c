//! Running the workspace's tests to the end and saying what happened.
//!
//! Contract: `cargo xtask test` runs every test binary even when one fails (`--no-fail-fast`), and
//! ends with one line of passed, failed and ignored over the whole run, followed by every failing
//! test with the cargo target that holds it, and every binary that stopped without a verdict (a
//! crash). Its exit status is non-zero exactly when something failed or cargo itself did.
//!
//! libtest has no stable machine-readable output (its JSON format needs a nightly switch), so the
//! tally reads its human summary lines, which it has printed unchanged for years: `running N
//! tests`, `test NAME ... FAILED`, `test result: ...`, and cargo's own `Running`/`Doc-tests`
//! headers and `to rerun pass` hints. cargo's stderr and the binaries' stdout go through one pipe,
//! so those lines arrive in the order they were written. Everything is echoed as it comes; the
//! tally only adds the summary.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

/// The floating-point paths a test pass runs on. Nothing in the build changes, only which
/// kernels the libraries dispatch to at run time, so one build serves both passes.
///
/// A floating result compared with a stored one (a fixture, a snapshot) must not depend on which
/// kernels a CPU gets: an Intel AVX-512 machine and an AMD one take different MKL and ATen paths
/// and round differently in the last bits. The development and CI machines are of one kind, so
/// the second pass moves every test onto other paths on purpose, and a test whose verdict
/// depends on them fails here rather than on a user's machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FloatingPath {
    /// The machine's own dispatch (AVX-512 or AVX2 kernels in ATen, MKL and oneDNN).
    Native,
    /// The x86-64 baseline: ATen's default (non-vectorized) kernels, MKL restricted to SSE4.2
    /// (its GEMMs and the vector math behind erfinv and friends), oneDNN to SSE4.1.
    Baseline,
}

impl FloatingPath {
    /// The variables that select the path. Native sets none, so a caller's own choice holds.
    pub fn vars(self) -> &'static [(&'static str, &'static str)] {
        match self {
            FloatingPath::Native => &[],
            FloatingPath::Baseline => &[
                ("ATEN_CPU_CAPABILITY", "default"),
                ("MKL_ENABLE_INSTRUCTIONS", "SSE4_2"),
                ("DNNL_MAX_CPU_ISA", "SSE41"),
            ],
        }
    }

    /// Tests this pass leaves out, with the reason: each compares no floating value with a stored
    /// one, so no kernel path can change its verdict, and it would cost minutes more here.
    pub fn skipped(self) -> &'static [(&'static str, &'static str)] {
        match self {
            FloatingPath::Native => &[],
            FloatingPath::Baseline => &[
                (
                    "the_whole_paper_plan_rehearses_on_miniatures",
                    "every paper cell must build, train a few steps and end with a finite error; \
                     the suite's longest test (10 minutes on the native pass), several times \
                     that on scalar kernels",
                ),
                (
                    "the_paper_plan_rehearses_on_miniatures",
                    "the Galerkin Transformer's and GNOT's rehearsals (one name, one filter), \
                     the same check (the Galerkin one: 6 minutes on the native pass, 11 on \
                     scalar kernels)",
                ),
            ],
        }
    }

    /// The variables of the path, and `--skip` for each left-out test after `args`' `--`.
    pub fn apply(self, cmd: &mut Command, args: &[std::ffi::OsString]) {
        for (k, v) in self.vars() {
            cmd.env(k, v);
        }
        let skipped = self.skipped();
        if skipped.is_empty() {
            return;
        }
        if !args.iter().any(|a| a == "--") {
            cmd.arg("--");
        }
        for (name, _) in skipped {
            cmd.args(["--skip", name]);
        }
    }

    pub fn describe(self) -> String {
        match self {
            FloatingPath::Native => "the machine's own kernels".to_string(),
            FloatingPath::Baseline => {
                let vars: Vec<String> = self
                    .vars()
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let skipped: Vec<String> = self
                    .skipped()
                    .iter()
                    .map(|(name, why)| format!("{name} ({why})"))
                    .collect();
                format!("{}; leaving out {}", vars.join(" "), skipped.join(", "))
            }
        }
    }
}

impl std::fmt::Display for FloatingPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FloatingPath::Native => "native",
            FloatingPath::Baseline => "baseline",
        })
    }
}

/// What one `cargo test` run printed, counted.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    pub passed: u64,
    pub failed: u64,
    pub ignored: u64,
    /// Test binaries (and doc-test groups) that gave a verdict.
    pub binaries: u64,
    /// `target: test` for each failing test, in the order they were reported.
    pub failures: Vec<String>,
    /// Binaries that started and never printed their result (killed, aborted, crashed).
    pub unfinished: Vec<String>,
    /// cargo's `-p PKG --test NAME` for each target it reports as failed.
    pub failed_targets: Vec<String>,
    current: Option<Binary>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Binary {
    name: String,
    started: bool,
}

impl Tally {
    /// Reads one line of the merged output.
    pub fn line(&mut self, line: &str) {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("Running ") {
            // `Running tests/x.rs (target/debug/deps/x-hash)` or `Running unittests src/lib.rs (…)`.
            self.begin(binary_name(rest));
        } else if let Some(rest) = t.strip_prefix("Doc-tests ") {
            self.begin(format!("doc-tests {rest}"));
        } else if t.starts_with("running ") && t.ends_with(" tests") || t == "running 1 test" {
            if let Some(b) = &mut self.current {
                b.started = true;
            }
        } else if let Some(rest) = t.strip_prefix("test result: ") {
            self.result(rest);
        } else if let Some(name) = t
            .strip_prefix("test ")
            .and_then(|r| r.strip_suffix(" ... FAILED"))
        {
            let target = self
                .current
                .as_ref()
                .map_or("?".to_string(), |b| b.name.clone());
            self.failures.push(format!("{target}: {name}"));
        } else if let Some(pos) = t.find("to rerun pass `") {
            let rest = &t[pos + "to rerun pass `".len()..];
            if let Some(end) = rest.find('`') {
                self.failed_targets.push(rest[..end].to_string());
            }
        }
    }

    fn begin(&mut self, name: String) {
        self.close();
        self.current = Some(Binary {
            name,
            started: false,
        });
    }

    /// A binary that announced itself (or started running tests) but never gave its result.
    fn close(&mut self) {
        if let Some(b) = self.current.take() {
            self.unfinished.push(if b.started {
                format!("{} (stopped while running its tests)", b.name)
            } else {
                format!("{} (stopped before running any test)", b.name)
            });
        }
    }

    /// `ok. 5 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s`
    fn result(&mut self, rest: &str) {
        // Only libtest's own summary: a test's captured output may hold anything.
        if !(rest.starts_with("ok.") || rest.starts_with("FAILED.")) {
            return;
        }
        self.current = None;
        self.binaries += 1;
        for part in rest.split(';') {
            let words: Vec<&str> = part.split_whitespace().collect();
            // The first part starts with `ok.` or `FAILED.`.
            let (n, what) = match words.as_slice() {
                [_, n, what, ..] if n.parse::<u64>().is_ok() => (n, what),
                [n, what, ..] => (n, what),
                _ => continue,
            };
            let Ok(n) = n.parse::<u64>() else { continue };
            match *what {
                "passed" => self.passed += n,
                "failed" => self.failed += n,
                "ignored" => self.ignored += n,
                _ => {}
            }
        }
    }

    /// Ends the run: a binary still open at the end never finished.
    pub fn finish(&mut self) {
        self.close();
    }

    pub fn ok(&self) -> bool {
        self.failed == 0 && self.failures.is_empty() && self.unfinished.is_empty()
    }

    /// The one-line summary, then one line per failure.
    pub fn report(&self, label: &str) -> String {
        let mut s = format!(
            "{label}: {} passed, {} failed, {} ignored ({} test binaries{})\n",
            self.passed,
            self.failed,
            self.ignored,
            self.binaries,
            if self.unfinished.is_empty() {
                String::new()
            } else {
                format!(", {} stopped without a result", self.unfinished.len())
            }
        );
        for f in &self.failures {
            s.push_str(&format!("  FAILED {f}\n"));
        }
        for u in &self.unfinished {
            s.push_str(&format!("  NO RESULT {u}\n"));
        }
        for t in &self.failed_targets {
            s.push_str(&format!("  rerun: cargo xtask test {t}\n"));
        }
        s
    }
}

/// `tests/x.rs (target/debug/deps/x-0123abcd)` → `tests/x.rs`; a library's or binary's unit
/// tests, `unittests src/lib.rs (target/debug/deps/ono_io-…)`, → `ono_io src/lib.rs`.
fn binary_name(rest: &str) -> String {
    let (what, path) = match rest.split_once(" (") {
        Some((w, p)) => (w.trim(), p.trim_end_matches(')')),
        None => (rest.trim(), ""),
    };
    let Some(what) = what.strip_prefix("unittests ") else {
        return what.to_string();
    };
    let file = path.rsplit('/').next().unwrap_or("");
    match file.rsplit_once('-') {
        Some((stem, _)) => format!("{stem} {what}"),
        None => what.to_string(),
    }
}

/// Runs `cmd` (a `cargo test`) with its stdout and stderr merged, echoing every line to our
/// stdout and counting it. Returns the tally and whether cargo exited successfully.
pub fn run_counted(mut cmd: Command) -> Result<(Tally, bool)> {
    let (reader, writer) = std::io::pipe().context("could not create a pipe")?;
    let writer2 = writer.try_clone().context("could not clone a pipe")?;
    cmd.stdout(Stdio::from(writer)).stderr(Stdio::from(writer2));
    let shown = format!("{cmd:?}");
    let mut child = cmd
        .spawn()
        .with_context(|| format!("could not start {shown}"))?;
    // The child holds the only write ends now: ours went into `cmd`, dropped here.
    drop(cmd);
    let mut tally = Tally::default();
    let mut out = std::io::stdout().lock();
    for line in BufReader::new(reader).split(b'\n') {
        let line = line.context("reading the test output")?;
        let line = String::from_utf8_lossy(&line);
        let _ = writeln!(out, "{line}");
        tally.line(&line);
    }
    tally.finish();
    let status = child
        .wait()
        .with_context(|| format!("waiting for {shown}"))?;
    Ok((tally, status.success()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRANSCRIPT: &str = "\
   Compiling ono-io v0.1.0
    Finished `test` profile [unoptimized + debuginfo] target(s) in 1.2s
     Running unittests src/lib.rs (target/debug/deps/ono_io-0123456789abcdef)

running 3 tests
test lock::tests::a ... ok
test lock::tests::b ... ignored, slow
test lock::tests::c ... ok

test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s

     Running tests/reference_loop.rs (target/debug/deps/reference_loop-fedcba9876543210)

running 2 tests
test restatements_reproduce_their_fixtures ... FAILED
test fno_agrees ... ok

failures:

---- restatements_reproduce_their_fixtures stdout ----
thread 'restatements_reproduce_their_fixtures' panicked at x.rs:1:1:
test result: this line is inside a test's output and is not a summary
failures:
    restatements_reproduce_their_fixtures

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 3.00s

error: test failed, to rerun pass `-p ono-cli --test reference_loop`
     Running tests/crash.rs (target/debug/deps/crash-0011223344556677)

running 1 test
error: test failed, to rerun pass `-p ono-cli --test crash`

Caused by:
  process didn't exit successfully: (signal: 11, SIGSEGV: invalid memory reference)
   Doc-tests ono_io

running 1 test
test crates/ono-io/src/lib.rs - atomic (line 10) ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.50s

error: 2 targets failed:
    `-p ono-cli --test reference_loop`
    `-p ono-cli --test crash`
";

    #[test]
    fn a_transcript_is_counted_with_its_failures_and_crashes() {
        let mut t = Tally::default();
        for l in TRANSCRIPT.lines() {
            t.line(l);
        }
        t.finish();
        // The `test result:` line inside a test's output is not a summary.
        assert_eq!((t.passed, t.failed, t.ignored, t.binaries), (4, 1, 1, 3));
        assert_eq!(
            t.failures,
            vec!["tests/reference_loop.rs: restatements_reproduce_their_fixtures"]
        );
        assert_eq!(
            t.unfinished,
            vec!["tests/crash.rs (stopped while running its tests)"]
        );
        assert_eq!(
            t.failed_targets,
            vec![
                "-p ono-cli --test reference_loop",
                "-p ono-cli --test crash",
            ]
        );
        assert!(!t.ok());
        let r = t.report("tests");
        assert!(r.starts_with("tests: 4 passed, 1 failed, 1 ignored"), "{r}");
    }

    #[test]
    fn a_clean_run_is_ok() {
        let mut t = Tally::default();
        for l in TRANSCRIPT.lines().take(11) {
            t.line(l);
        }
        t.finish();
        assert_eq!((t.passed, t.failed, t.ignored, t.binaries), (2, 0, 1, 1));
        assert!(t.ok(), "{t:?}");
    }

    #[test]
    fn the_baseline_pass_sets_its_paths_and_skips_after_the_separator() {
        let args = |cmd: &Command| -> Vec<String> {
            cmd.get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let skips: Vec<String> = FloatingPath::Baseline
            .skipped()
            .iter()
            .flat_map(|(name, _)| ["--skip".to_string(), name.to_string()])
            .collect();
        let with = |head: &[&str]| -> Vec<String> {
            head.iter()
                .map(|s| s.to_string())
                .chain(skips.clone())
                .collect()
        };
        let mut cmd = Command::new("cargo");
        cmd.args(["test", "-p", "ono-cli"]);
        FloatingPath::Baseline.apply(&mut cmd, &["-p".into(), "ono-cli".into()]);
        assert_eq!(args(&cmd), with(&["test", "-p", "ono-cli", "--"]));
        assert!(cmd
            .get_envs()
            .any(|(k, v)| k == "ATEN_CPU_CAPABILITY" && v == Some("default".as_ref())));
        // The caller's own `--` is reused: libtest takes everything after it.
        let mut cmd = Command::new("cargo");
        cmd.args(["test", "--", "cholesky"]);
        FloatingPath::Baseline.apply(&mut cmd, &["--".into(), "cholesky".into()]);
        assert_eq!(args(&cmd), with(&["test", "--", "cholesky"]));
        let mut cmd = Command::new("cargo");
        FloatingPath::Native.apply(&mut cmd, &[]);
        assert_eq!((cmd.get_args().count(), cmd.get_envs().count()), (0, 0));
    }

    #[test]
    fn binary_names() {
        assert_eq!(
            binary_name("unittests src/lib.rs (target/debug/deps/ono_io-0123)"),
            "ono_io src/lib.rs"
        );
        assert_eq!(
            binary_name("tests/whitening.rs (target/debug/deps/whitening-0123)"),
            "tests/whitening.rs"
        );
    }
}
