//! The build a library user of ono-train gets without its `dist` feature: no shim, launchers'
//! variables still read, and a process group refused with an error that says what to build.
//! Runs only under `cargo test -p ono-dist --no-default-features` (`cargo xtask test` does).

#![cfg(not(feature = "c10d"))]

use ono_dist::{Backend, DistError, Launch, Launcher, ProcessGroup};
use std::time::Duration;

#[test]
fn a_process_group_is_refused_by_name() {
    let launch = Launch {
        rank: 0,
        world: 2,
        local_rank: 0,
        local_world: 2,
        master_addr: "127.0.0.1".to_owned(),
        master_port: 29500,
        launcher: Launcher::Env,
        agent_store: false,
        restart_count: 0,
    };
    for backend in [Backend::Gloo, Backend::Nccl] {
        assert!(matches!(backend.available(), Err(DistError::C10dNotBuilt)));
        let err = ProcessGroup::new(&launch, backend, Duration::from_secs(1)).unwrap_err();
        assert!(matches!(err, DistError::C10dNotBuilt), "{err:?}");
        assert!(err.to_string().contains("`dist` feature"), "{err}");
    }
}
