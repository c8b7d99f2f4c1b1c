//! A child `ono` says its end as a typed message and the one spawner reads it: a result, a
//! refusal of the data by the architecture, and any other failure each arrive as their own
//! variant, with nothing read from the exit status or standard error.

mod common;

use ono_cli::message::{self, Ended, Message};
use ono_cli::reproduce::plan::{base, Task};

#[test]
fn results_refusals_and_failures_arrive_typed() {
    let tiny = "n_layers = 1\nn_hidden = 16\nn_head = 2\npsi_dim = 4";
    let said = message::run(
        common::bench_step_once(&["--preset", "darcy", "--overrides", tiny]),
        |_| {},
    )
    .unwrap();
    let Ended::Said(Message::StepTimes(report)) = &said else {
        panic!("{said:?}")
    };
    assert!(report.median_s > 0.0, "{report:?}");

    // Geo-FNO takes no padding mask: on samples of different sizes in one batch the
    // architecture refuses the data, whatever the run's settings.
    let dir = common::temp_dir("messages");
    let p = |s: &str| dir.join(s).display().to_string();
    common::ok(
        &common::ono()
            .args(["data", "darcy-vtu", "--n", "6", "--res", "9"])
            .args([
                "--min-points",
                "20",
                "--max-points",
                "30",
                "--out",
                &p("meshes"),
            ])
            .output()
            .unwrap(),
    );
    common::ok(
        &common::ono()
            .args([
                "data",
                "import",
                &p("meshes"),
                "--out",
                &p("set.safetensors"),
            ])
            .output()
            .unwrap(),
    );
    let mut cfg = base("geofno", Task::Elasticity).unwrap().unwrap();
    cfg.data.path = Some(dir.join("set.safetensors"));
    cfg.data.benchmark = None;
    cfg.data.data_dir = None;
    cfg.data.ntrain = None;
    cfg.data.ntest = None;
    cfg.batch_size = 2;
    cfg.output_dir = dir.join("run");
    let file = dir.join("run.toml");
    std::fs::write(&file, toml::to_string(&cfg).unwrap()).unwrap();
    let mut cmd = common::ono();
    cmd.arg("bench-train")
        .arg(&file)
        .args(["--steps", "1", "--warmup", "0"]);
    let said = message::run(cmd, |_| {}).unwrap();
    let Ended::Said(Message::Refused { why }) = &said else {
        panic!("{said:?}")
    };
    assert!(why.contains("mask"), "{why}");
    let _ = std::fs::remove_dir_all(&dir);

    // A bad option is a failure, with its causes.
    let said = message::run(
        common::bench_step_once(&["--preset", "darcy", "--precision", "fp8"]),
        |_| {},
    )
    .unwrap();
    let Ended::Said(Message::Failed { causes }) = &said else {
        panic!("{said:?}")
    };
    assert!(causes.join(": ").contains("fp8"), "{causes:?}");
}

/// Without the flag, a command prints its result for people and scripts as it always has: the
/// bare JSON line, which is no message.
#[test]
fn without_the_flag_the_result_is_the_bare_line() {
    let tiny = "n_layers = 1\nn_hidden = 16\nn_head = 2\npsi_dim = 4";
    let out = common::bench_step_once(&["--preset", "darcy", "--overrides", tiny])
        .output()
        .unwrap();
    common::ok(&out);
    let line = String::from_utf8_lossy(&out.stdout);
    let _: ono_train::bench_step::StepReport = serde_json::from_str(line.trim()).unwrap();
    assert!(
        serde_json::from_str::<Message>(line.trim()).is_err(),
        "{line}"
    );
}
