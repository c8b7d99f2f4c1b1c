//! `ono reproduce --rehearse`: every experiment of the paper plan, at its paper model size and
//! recipe, builds, reads its miniature of a published file (the six benchmarks' formats, written
//! by the call), trains for an epoch of a few steps, evaluates and writes its result. A cell that
//! cannot is named by the call's failure lines and fails this test.

mod common;

use common::{rehearse, temp_dir};

#[test]
fn the_whole_paper_plan_rehearses_on_miniatures() {
    let dir = temp_dir("reproduce-rehearsal");
    let out = dir.join("out");
    let (s, log) = rehearse(&[], &out, |id| id.starts_with("runtime/"));
    let experiments = s["experiments"].as_array().unwrap();
    // The paper plan: every table's experiments (Tables 1–8), none left out.
    assert!(experiments.len() >= 70, "{} experiments", experiments.len());
    // No published file was read: the data folders are the miniatures the call wrote.
    let miniatures = out.join("miniatures").canonicalize().unwrap();
    for f in [
        "piececonst_r421_N1024_smooth1.mat",
        "plas_N987_T20.mat",
        "Pipe_Q.npy",
    ] {
        assert!(miniatures.join(f).is_file(), "{f}");
    }
    assert!(!log.contains("no data"), "{log}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.starts_with("# The ONO paper's tables: a rehearsal of the paper profile"),
        "{}",
        &report[..200.min(report.len())]
    );
    assert!(report.contains("`ono reproduce --rehearse`"));
    // Its numbers judge none of the paper's findings.
    assert_eq!(s["findings"].as_array().map(Vec::len), Some(0));
    assert!(report.contains("## The paper's findings\n\nNot judged"));
    // Finished experiments keep no checkpoint (paper-size ones reach gigabytes).
    assert!(!out.join("pipe/ufno/checkpoints").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
