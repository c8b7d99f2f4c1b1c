//! The schedules stepped once per epoch against PyTorch's own recurrences: `StepLR` and
//! `CosineAnnealingLR(T_max = epochs, eta_min = 0)` (NSL's Elasticity scripts).

use ono_train::config::TrainConfig;

fn config(schedule: &str) -> TrainConfig {
    TrainConfig::from_toml(&format!(
        "epochs = 50\nbatch_size = 4\noutput_dir = \"x\"\n[model]\n[data]\npath = \"d\"\n[optimizer]\nlr = 2e-3\n[schedule]\n{schedule}"
    ))
    .unwrap()
}

/// `torch.optim.lr_scheduler.CosineAnnealingLR.get_lr`, the chainable form PyTorch steps with:
/// each epoch's lr from the previous one.
fn torch_cosine(base: f64, t_max: u64, epochs: u64) -> Vec<f64> {
    let pi = std::f64::consts::PI;
    let mut lrs = vec![base];
    for e in 1..epochs {
        let prev = lrs[e as usize - 1];
        let lr = if (e as i64 - 1 - t_max as i64).rem_euclid(2 * t_max as i64) == 0 {
            prev + base * (1.0 - (pi / t_max as f64).cos()) / 2.0
        } else {
            (1.0 + (pi * e as f64 / t_max as f64).cos())
                / (1.0 + (pi * (e - 1) as f64 / t_max as f64).cos())
                * prev
        };
        lrs.push(lr);
    }
    lrs
}

#[test]
fn cosine_is_torchs_cosine_annealing_over_the_epochs() {
    let cfg = config("kind = \"cosine\"");
    cfg.validate().unwrap();
    let torch = torch_cosine(2e-3, 50, 50);
    for (e, want) in torch.iter().enumerate() {
        let got = cfg.epoch_lr(e as u64).unwrap();
        assert!(
            (got - want).abs() <= 1e-12 * 2e-3,
            "epoch {e}: {got} vs {want}"
        );
    }
    // Half-way at half the epochs, and nearly 0 at the last one.
    assert!((cfg.epoch_lr(25).unwrap() - 1e-3).abs() < 1e-15);
    assert!(cfg.epoch_lr(49).unwrap() < 3e-6);
}

#[test]
fn step_halves_every_step_size_epochs_and_one_cycle_steps_per_batch() {
    let cfg = config("kind = \"step\"\nstep_size = 10\ngamma = 0.5");
    for (e, want) in [(0, 2e-3), (9, 2e-3), (10, 1e-3), (29, 5e-4), (30, 2.5e-4)] {
        assert_eq!(cfg.epoch_lr(e), Some(want), "epoch {e}");
    }
    assert_eq!(config("kind = \"constant\"").epoch_lr(7), Some(2e-3));
    assert_eq!(config("").epoch_lr(0), None);
}
