//! A world of one, in this process: the store server, the backend and its teardown without any
//! child process; and NCCL, which is a clear error where it cannot run.

// These need the shim; `without_c10d.rs` covers the build without it.
#![cfg(feature = "c10d")]

use ono_dist::{Backend, DistError, Launch, Launcher, ProcessGroup};
use std::net::TcpListener;
use std::time::Duration;
use tch::{Device, Kind, Tensor};

fn alone() -> Launch {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port();
    Launch {
        rank: 0,
        world: 1,
        local_rank: 0,
        local_world: 1,
        master_addr: "127.0.0.1".to_owned(),
        master_port: port,
        launcher: Launcher::Env,
        agent_store: false,
        restart_count: 0,
    }
}

#[test]
fn gloo_world_of_one_is_the_identity() {
    let pg = ProcessGroup::new(&alone(), Backend::Gloo, Duration::from_secs(10)).unwrap();
    let t = Tensor::from_slice(&[1.5f32, -2.0, 3.25]);
    pg.all_reduce_sum(&[t.shallow_clone()]).unwrap();
    assert_eq!(Vec::<f32>::try_from(&t).unwrap(), [1.5, -2.0, 3.25]);
    pg.broadcast(&[t.shallow_clone()], 0).unwrap();
    let rows = pg.all_gather_rows(&Tensor::from_slice(&[7i64, 8])).unwrap();
    assert_eq!(Vec::<Vec<i64>>::try_from(&rows).unwrap(), [[7, 8]]);
    pg.barrier().unwrap();
}

#[test]
fn bad_arguments_are_refused_before_torch() {
    let pg = ProcessGroup::new(&alone(), Backend::Gloo, Duration::from_secs(10)).unwrap();
    let sparse = Tensor::eye(3, (Kind::Float, Device::Cpu)).to_sparse_sparse_dim(2);
    let strided = Tensor::zeros([3, 2], (Kind::Float, Device::Cpu)).transpose(0, 1);
    for bad in [sparse, strided, Tensor::new()] {
        match pg.all_reduce_sum(&[bad]) {
            Err(e @ DistError::InvalidArgument { .. }) => println!("{e}"),
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        pg.all_gather_rows(&Tensor::new()),
        Err(DistError::InvalidArgument { .. })
    ));
    // Refused after the header exchange, on every rank alike.
    let sparse = Tensor::eye(2, (Kind::Int64, Device::Cpu)).to_sparse_sparse_dim(2);
    assert!(matches!(
        pg.all_gather_rows(&sparse),
        Err(DistError::InvalidArgument { .. })
    ));

    let mut l = alone();
    l.rank = 1;
    assert!(matches!(
        ProcessGroup::new(&l, Backend::Gloo, Duration::from_secs(1)),
        Err(DistError::InvalidArgument { .. })
    ));
    assert!(matches!(
        ProcessGroup::new(&alone(), Backend::Gloo, Duration::ZERO),
        Err(DistError::InvalidArgument { .. })
    ));
    let mut l = alone();
    l.master_addr = "a\0b".to_owned();
    assert!(matches!(
        ProcessGroup::new(&l, Backend::Gloo, Duration::from_secs(1)),
        Err(DistError::InvalidArgument { .. })
    ));
}

/// Where NCCL was not built, or there is no GPU, asking for it is an error that says why; with a
/// GPU, a world of one reduces on `cuda:{local_rank}`.
#[test]
fn nccl_is_an_error_where_it_cannot_run() {
    if let Err(e) = Backend::Nccl.available() {
        let got = ProcessGroup::new(&alone(), Backend::Nccl, Duration::from_secs(10));
        assert!(
            matches!(got, Err(DistError::NcclUnavailable { .. })),
            "{got:?}"
        );
        println!("NCCL not built: {e}");
        return;
    }
    let got = ProcessGroup::new(&alone(), Backend::Nccl, Duration::from_secs(20));
    if !tch::Cuda::is_available() {
        match got {
            Err(e @ DistError::Backend { .. }) => println!("no GPU: {e}"),
            other => panic!("expected a backend error without a GPU, got {other:?}"),
        }
        return;
    }
    let pg = got.unwrap();
    let t = Tensor::from_slice(&[1.0f64, 2.0]).to_device(Device::Cuda(0));
    pg.all_reduce_sum(&[t.shallow_clone()]).unwrap();
    assert_eq!(
        Vec::<f64>::try_from(&t.to_device(Device::Cpu)).unwrap(),
        [1.0, 2.0]
    );
    let rows = pg
        .all_gather_rows(&Tensor::ones([2], (Kind::Int64, Device::Cuda(0))))
        .unwrap();
    assert_eq!(rows.size(), [1, 2]);
    pg.barrier().unwrap();
    println!("NCCL world of one on cuda:0: ok");
}
