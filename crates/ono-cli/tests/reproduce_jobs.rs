//! `ono reproduce` in several processes on one results folder: two calls started at once train
//! each experiment exactly once between them; a call killed with SIGKILL while it trains leaves
//! nothing locked; `--shard` parts add up to the plan; `--jobs 2` trains two experiments at a
//! time and reports what a sequential call reports.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use common::{neuralop_miniature, ok, ono, temp_dir};
use serde_json::Value;

/// The smoke profile into `out` (one torch thread unless `extra` says otherwise), reading the
/// neuraloperator miniature in `neuralop`.
fn smoke(out: &Path, neuralop: &Path, extra: &[&str]) -> Command {
    let mut c = ono();
    c.args(["reproduce", "--profile", "smoke", "--neuralop-dir"])
        .arg(neuralop)
        .arg("--out")
        .arg(out)
        .args(extra);
    if !extra.contains(&"--threads") && !extra.contains(&"--jobs") {
        c.args(["--threads", "1"]);
    }
    c
}

/// The ids a call's log says it trained to the end (`[k/n] <id> finished in …`), with the
/// label of the worker that did where the line has one.
fn trained(log: &str) -> Vec<(String, String)> {
    log.lines()
        .filter(|l| l.contains(" finished in "))
        .filter_map(|l| {
            let (worker, rest) = match l.strip_prefix('[') {
                Some(r) if !r.starts_with(|c: char| c.is_ascii_digit()) => {
                    let (w, rest) = r.split_once("] ")?;
                    (w.to_string(), rest)
                }
                _ => (String::new(), l),
            };
            let id = rest.split_once("] ")?.1.split(' ').next()?;
            Some((worker, id.to_string()))
        })
        .collect()
}

/// Each experiment of `summary.json`: its status and numbers. Left out: what differs between
/// any two calls (wall time, date, machine, commit, and the timed steps' seconds and peak
/// memory) and what names the results folder (the recorded experiment, a missing file's
/// message).
fn results(out: &Path) -> BTreeMap<String, Value> {
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    s["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let mut e = e.clone();
            let m = e.as_object_mut().unwrap();
            for k in [
                "wall_s",
                "finished",
                "machine",
                "device",
                "commit",
                "experiment",
                "detail",
                "step_s",
                "peak_mb",
            ] {
                m.remove(k);
            }
            (m["id"].as_str().unwrap().to_string(), e)
        })
        .collect()
}

/// What the report concludes: every cell's value but those of the measured Tables 2 (seconds
/// per step) and 8 (peak memory), and every finding's verdict and numbers.
fn conclusions(out: &Path) -> (Vec<Value>, Value) {
    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let cells = s["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["table"] != 2 && c["table"] != 8)
        .cloned()
        .collect();
    (cells, s["findings"].clone())
}

/// Asserts two calls' results agree, naming the experiments that do not.
fn assert_same_results(a: &Path, b: &Path) {
    let (ra, rb) = (results(a), results(b));
    let differ: Vec<String> = ra
        .keys()
        .chain(rb.keys())
        .filter(|k| ra.get(*k) != rb.get(*k))
        .map(|k| format!("{k}: {:?} against {:?}", ra.get(k), rb.get(k)))
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

fn done_ids(out: &Path) -> Vec<String> {
    results(out)
        .into_iter()
        .filter(|(_, e)| e["status"] == "done")
        .map(|(id, _)| id)
        .collect()
}

#[test]
fn two_calls_at_once_train_each_experiment_once() {
    let dir = temp_dir("reproduce-two");
    let neuralop = neuralop_miniature(&dir);
    let out = dir.join("out");
    let spawn = || {
        smoke(&out, &neuralop, &[])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let (la, lb) = (ok(&a), ok(&b));
    let (ta, tb) = (trained(&la), trained(&lb));
    let mut all: Vec<String> = ta.iter().chain(&tb).map(|(_, id)| id.clone()).collect();
    all.sort();
    let done = done_ids(&out);
    assert_eq!(all, done, "every finished experiment trained exactly once");
    assert!(done.len() >= 30, "{} experiments done", done.len());
    assert!(
        !ta.is_empty() && !tb.is_empty(),
        "both calls trained: {} and {}",
        ta.len(),
        tb.len()
    );
    // Both saw every result and wrote the same report.
    assert!(la.contains("report:") && lb.contains("report:"));
}

#[test]
fn a_call_killed_while_training_blocks_nothing_and_shards_add_up() {
    let dir = temp_dir("reproduce-killed");
    let neuralop = neuralop_miniature(&dir);
    let out = dir.join("out");
    let select = ["--only", "table1", "--models", "ono,fno"];
    let mut first = smoke(&out, &neuralop, &select)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kill it as soon as it has started to train an experiment (so holds its lock).
    let mut lines = BufReader::new(first.stderr.take().unwrap()).lines();
    let started = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.contains(" — elapsed "))
        .expect("the first call started an experiment");
    let id = started
        .split_once("] ")
        .unwrap()
        .1
        .split(' ')
        .next()
        .unwrap();
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    let lock = out.join(id).join(".lock");
    assert!(lock.is_file(), "{} holds the lock file", lock.display());

    let second = ok(&smoke(&out, &neuralop, &select).output().unwrap());
    assert!(
        !second.contains("waiting for"),
        "the killed call's lock was free: {second}"
    );
    let done = done_ids(&out);
    assert!(done.contains(&id.to_string()), "{id} finished: {done:?}");

    // Two shards of a fresh folder train disjoint parts, write no report, and a plain call
    // afterwards trains nothing and writes it.
    let sharded = dir.join("sharded");
    let mut parts = Vec::new();
    for s in ["1/2", "2/2"] {
        let log = ok(&smoke(
            &sharded,
            &neuralop,
            &[&select[..], &["--shard", s]].concat(),
        )
        .output()
        .unwrap());
        parts.push(trained(&log));
        if s == "1/2" {
            assert!(log.contains("other shards"), "{log}");
            assert!(!sharded.join("report.md").exists());
        }
    }
    let last = ok(&smoke(&sharded, &neuralop, &select).output().unwrap());
    assert!(trained(&last).is_empty(), "nothing left to train: {last}");
    assert!(sharded.join("report.md").is_file());
    let (a, b) = (&parts[0], &parts[1]);
    assert!(!a.is_empty() && !b.is_empty());
    assert!(a.iter().all(|x| !b.contains(x)), "disjoint: {a:?} {b:?}");
    let mut both: Vec<String> = a.iter().chain(b).map(|(_, id)| id.clone()).collect();
    both.sort();
    assert_eq!(both, done_ids(&sharded));
    assert_same_results(&sharded, &out);
}

#[test]
fn jobs_two_trains_two_at_a_time_and_reports_what_one_call_reports() {
    let dir = temp_dir("reproduce-jobs");
    let neuralop = neuralop_miniature(&dir);
    let (one, two) = (dir.join("one"), dir.join("two"));
    ok(&smoke(&one, &neuralop, &[]).output().unwrap());
    let log = ok(&smoke(&two, &neuralop, &["--jobs", "2", "--threads", "2"])
        .output()
        .unwrap());
    let workers = trained(&log);
    for w in ["job 1 of 2", "job 2 of 2"] {
        assert!(
            workers.iter().any(|(label, _)| label == w),
            "{w} trained experiments: {log}"
        );
        assert!(
            log.contains(&format!("[{w}] started: 1 threads on cpu")),
            "{log}"
        );
    }
    let mut ids: Vec<String> = workers.into_iter().map(|(_, id)| id).collect();
    ids.sort();
    assert_eq!(ids, done_ids(&two), "each trained once, by a worker");
    assert_same_results(&two, &one);
    assert_eq!(conclusions(&two), conclusions(&one));
}
