//! Who started this process, and where rank 0's store is: the variables of torchrun, plain
//! `env://`, Slurm's `srun` and MPI, read the way torch (or the launcher's documentation) means
//! them.
//!
//! The launchers are tried in a fixed order: torchrun / `env://` first (the variables torch itself
//! reads, which a user may also set by hand inside a Slurm or MPI job to override it), then Slurm,
//! then MPI (Slurm's PMI also exports `PMI_RANK`, so an `srun` launch must be recognised before
//! MPICH's variables are looked at).

use crate::error::{DistError, Result};
use std::fmt;

/// The program that started the ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Launcher {
    /// `torchrun` (torch.distributed.run): `TORCHELASTIC_RUN_ID` is set.
    Torchrun,
    /// Plain `env://` variables set by hand or by another tool: `RANK` and `WORLD_SIZE`.
    Env,
    /// Slurm's `srun`: a job step (`SLURM_STEP_ID`) with a rank per task.
    Slurm,
    /// `mpirun` / `mpiexec` of Open MPI, or of MPICH / Intel MPI (Hydra).
    Mpi,
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Launcher::Torchrun => "torchrun",
            Launcher::Env => "env://",
            Launcher::Slurm => "Slurm srun",
            Launcher::Mpi => "MPI",
        })
    }
}

/// This process's place in a multi-process launch.
///
/// `local_rank` is the rank among the processes of this node; it, never the global rank, is
/// the CUDA device a rank uses (neuraloperator picked `cuda:{rank}`, which is right on one node
/// only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// Global rank, `0..world`.
    pub rank: usize,
    /// Number of ranks.
    pub world: usize,
    /// Rank among the processes on this node, `0..local_world`.
    pub local_rank: usize,
    /// Processes on this node.
    pub local_world: usize,
    /// Host of the TCPStore (rank 0's, or torchrun's agent's).
    pub master_addr: String,
    /// Port of the TCPStore.
    pub master_port: u16,
    /// Which launcher's variables these are.
    pub launcher: Launcher,
    /// torchrun hosts the store in its agent (`TORCHELASTIC_USE_AGENT_STORE=True`): every rank,
    /// rank 0 included, is then a client of it.
    pub agent_store: bool,
    /// torchrun's `TORCHELASTIC_RESTART_COUNT`: how often the worker group was restarted.
    pub restart_count: u32,
}

impl Launch {
    /// The launch described by this process's environment; `Ok(None)` when no launcher started it
    /// (a plain single-process run). See [`Launch::from_vars`].
    pub fn from_env() -> Result<Option<Launch>> {
        Launch::from_vars(|name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()))
    }

    /// The launch described by the variables `get` returns (`None`: unset). An empty value counts
    /// as unset, as in torch's `env://` handler.
    ///
    /// * **torchrun** (`TORCHELASTIC_RUN_ID`): `RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
    ///   `LOCAL_WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT` are required;
    ///   `TORCHELASTIC_RESTART_COUNT` (default 0) and `TORCHELASTIC_USE_AGENT_STORE` (exactly
    ///   `True`, as torch compares it) are read too.
    /// * **env://** (`RANK` and `WORLD_SIZE`, no `TORCHELASTIC_RUN_ID`): `MASTER_ADDR` and
    ///   `MASTER_PORT` are required. `LOCAL_RANK` and `LOCAL_WORLD_SIZE` are optional but go
    ///   together; without them all ranks are taken to be on one node.
    /// * **Slurm** (`SLURM_STEP_ID`, `SLURM_PROCID`, `SLURM_STEP_NUM_TASKS`): rank, world and
    ///   `SLURM_LOCALID`; the node's process count is the first number of
    ///   `SLURM_STEP_TASKS_PER_NODE` (`"4(x2),3"` → 4; only informative on uneven layouts) or
    ///   `SLURM_NTASKS_PER_NODE`. `MASTER_ADDR` defaults to `SLURM_LAUNCH_NODE_IPADDR`, the node
    ///   that ran `srun`: in an `sbatch` script that is the allocation's first node, where rank 0
    ///   runs; an `srun` from a login node needs `MASTER_ADDR`. `MASTER_PORT` defaults to
    ///   `20000 + SLURM_JOB_ID % 20000`: every rank computes the same port without talking to the
    ///   others, jobs that share a node get different ports (unless their IDs are 20000 apart),
    ///   and the range stays above the privileged ports. Two concurrent steps of one job need
    ///   their own `MASTER_PORT`. A batch script that does not call `srun` has no
    ///   `SLURM_STEP_ID` and runs as one process.
    /// * **MPI**: Open MPI's `OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}`, else MPICH /
    ///   Hydra's `PMI_RANK`, `PMI_SIZE`, `MPI_LOCALRANKID`, `MPI_LOCALNRANKS`. `MASTER_ADDR`
    ///   defaults to `127.0.0.1` when every rank is on this node, and is otherwise required (MPI
    ///   exports no host of rank 0); `MASTER_PORT` defaults to 29500, torch's default.
    ///
    /// A world size of 1 from a launcher is still `Some`. A malformed value is an error naming the
    /// variable; no launcher is `Ok(None)`.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Option<Launch>> {
        let v = Vars {
            get: |name: &str| get(name).filter(|s| !s.is_empty()),
        };
        if v.get("TORCHELASTIC_RUN_ID").is_some() {
            return torchrun(&v).map(Some);
        }
        if v.get("RANK").is_some() || v.get("WORLD_SIZE").is_some() {
            return env(&v).map(Some);
        }
        if ["SLURM_STEP_ID", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS"]
            .iter()
            .all(|n| v.get(n).is_some())
        {
            return slurm(&v).map(Some);
        }
        if v.get("OMPI_COMM_WORLD_RANK").is_some() || v.get("PMI_RANK").is_some() {
            return mpi(&v).map(Some);
        }
        Ok(None)
    }
}

/// The variables, with empty values as unset.
struct Vars<F> {
    get: F,
}

impl<F: Fn(&str) -> Option<String>> Vars<F> {
    fn get(&self, name: &str) -> Option<String> {
        (self.get)(name)
    }

    fn required(&self, launcher: Launcher, var: &'static str) -> Result<String> {
        self.get(var).ok_or(DistError::MissingVar {
            launcher,
            var,
            hint: "",
        })
    }

    fn count(&self, launcher: Launcher, var: &'static str) -> Result<usize> {
        number(var, &self.required(launcher, var)?)
    }

    fn port(&self, launcher: Launcher, var: &'static str) -> Result<u16> {
        port(var, &self.required(launcher, var)?)
    }
}

fn number<T: std::str::FromStr>(var: &'static str, value: &str) -> Result<T> {
    value.parse().map_err(|_| DistError::BadVar {
        var,
        value: value.to_owned(),
        why: "not a non-negative integer".to_owned(),
    })
}

/// A port a client can connect to: 0 ("any port") is only meaningful to a server.
fn port(var: &'static str, value: &str) -> Result<u16> {
    match value.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(DistError::BadVar {
            var,
            value: value.to_owned(),
            why: "not a TCP port (1..=65535)".to_owned(),
        }),
    }
}

/// Rank, world, local rank and local world, with the names of their variables.
struct Places {
    rank: (usize, &'static str),
    world: (usize, &'static str),
    local_rank: (usize, &'static str),
    local_world: (usize, &'static str),
}

impl Places {
    /// A world of at least one, each rank below its count, and no more ranks on a node than in
    /// the world.
    fn check(self) -> Result<Self> {
        let bad = |(value, var): (usize, &'static str), why: String| DistError::BadVar {
            var,
            value: value.to_string(),
            why,
        };
        for (count, what) in [
            (self.world, "world size"),
            (self.local_world, "local world size"),
        ] {
            if count.0 == 0 {
                return Err(bad(count, format!("a {what} of 0")));
            }
        }
        for (rank, count) in [(self.rank, self.world), (self.local_rank, self.local_world)] {
            if rank.0 >= count.0 {
                return Err(bad(
                    rank,
                    format!("rank {} is not below {}={}", rank.0, count.1, count.0),
                ));
            }
        }
        if self.local_world.0 > self.world.0 {
            return Err(bad(
                self.local_world,
                format!(
                    "more ranks on this node than {}={}",
                    self.world.1, self.world.0
                ),
            ));
        }
        Ok(self)
    }

    fn launch(self, launcher: Launcher, master_addr: String, master_port: u16) -> Launch {
        Launch {
            rank: self.rank.0,
            world: self.world.0,
            local_rank: self.local_rank.0,
            local_world: self.local_world.0,
            master_addr,
            master_port,
            launcher,
            agent_store: false,
            restart_count: 0,
        }
    }
}

fn torchrun<F: Fn(&str) -> Option<String>>(v: &Vars<F>) -> Result<Launch> {
    let l = Launcher::Torchrun;
    let places = Places {
        rank: (v.count(l, "RANK")?, "RANK"),
        world: (v.count(l, "WORLD_SIZE")?, "WORLD_SIZE"),
        local_rank: (v.count(l, "LOCAL_RANK")?, "LOCAL_RANK"),
        local_world: (v.count(l, "LOCAL_WORLD_SIZE")?, "LOCAL_WORLD_SIZE"),
    }
    .check()?;
    let addr = v.required(l, "MASTER_ADDR")?;
    let port = v.port(l, "MASTER_PORT")?;
    let restart_count = match v.get("TORCHELASTIC_RESTART_COUNT") {
        Some(s) => number("TORCHELASTIC_RESTART_COUNT", &s)?,
        None => 0,
    };
    // torch.distributed.rendezvous._torchelastic_use_agent_store: `== str(True)`, nothing else.
    let agent_store = v.get("TORCHELASTIC_USE_AGENT_STORE").as_deref() == Some("True");
    Ok(Launch {
        agent_store,
        restart_count,
        ..places.launch(l, addr, port)
    })
}

fn env<F: Fn(&str) -> Option<String>>(v: &Vars<F>) -> Result<Launch> {
    let l = Launcher::Env;
    let rank = v.count(l, "RANK")?;
    let world = v.count(l, "WORLD_SIZE")?;
    let (local_rank, local_world) = match (v.get("LOCAL_RANK"), v.get("LOCAL_WORLD_SIZE")) {
        (None, None) => ((rank, "RANK"), (world, "WORLD_SIZE")),
        (Some(_), None) => return Err(missing_pair(l, "LOCAL_WORLD_SIZE")),
        (None, Some(_)) => return Err(missing_pair(l, "LOCAL_RANK")),
        (Some(r), Some(w)) => (
            (number("LOCAL_RANK", &r)?, "LOCAL_RANK"),
            (number("LOCAL_WORLD_SIZE", &w)?, "LOCAL_WORLD_SIZE"),
        ),
    };
    let places = Places {
        rank: (rank, "RANK"),
        world: (world, "WORLD_SIZE"),
        local_rank,
        local_world,
    }
    .check()?;
    let addr = v.required(l, "MASTER_ADDR")?;
    let port = v.port(l, "MASTER_PORT")?;
    Ok(places.launch(l, addr, port))
}

fn missing_pair(launcher: Launcher, var: &'static str) -> DistError {
    DistError::MissingVar {
        launcher,
        var,
        hint: "; LOCAL_RANK and LOCAL_WORLD_SIZE go together (set both, or neither for one node)",
    }
}

fn slurm<F: Fn(&str) -> Option<String>>(v: &Vars<F>) -> Result<Launch> {
    let l = Launcher::Slurm;
    let local_world = match (
        v.get("SLURM_STEP_TASKS_PER_NODE"),
        v.get("SLURM_NTASKS_PER_NODE"),
    ) {
        (Some(s), _) => {
            // "4(x2),3": the count of the first node (digits up to the first other character).
            let first: String = s.chars().take_while(char::is_ascii_digit).collect();
            let n: usize =
                number("SLURM_STEP_TASKS_PER_NODE", &first).map_err(|_| DistError::BadVar {
                    var: "SLURM_STEP_TASKS_PER_NODE",
                    value: s.clone(),
                    why: "does not start with a task count".to_owned(),
                })?;
            (n, "SLURM_STEP_TASKS_PER_NODE")
        }
        (None, Some(s)) => (
            number("SLURM_NTASKS_PER_NODE", &s)?,
            "SLURM_NTASKS_PER_NODE",
        ),
        (None, None) => {
            return Err(DistError::MissingVar {
                launcher: l,
                var: "SLURM_STEP_TASKS_PER_NODE",
                hint: " (nor SLURM_NTASKS_PER_NODE)",
            })
        }
    };
    let places = Places {
        rank: (v.count(l, "SLURM_PROCID")?, "SLURM_PROCID"),
        world: (v.count(l, "SLURM_STEP_NUM_TASKS")?, "SLURM_STEP_NUM_TASKS"),
        local_rank: (v.count(l, "SLURM_LOCALID")?, "SLURM_LOCALID"),
        local_world,
    }
    .check()?;
    let addr = match v.get("MASTER_ADDR") {
        Some(a) => a,
        None => v
            .get("SLURM_LAUNCH_NODE_IPADDR")
            .ok_or(DistError::MissingVar {
                launcher: l,
                var: "MASTER_ADDR",
                hint: " (nor SLURM_LAUNCH_NODE_IPADDR)",
            })?,
    };
    let port = match v.get("MASTER_PORT") {
        Some(p) => port("MASTER_PORT", &p)?,
        None => {
            let job = v.get("SLURM_JOB_ID").ok_or(DistError::MissingVar {
                launcher: l,
                var: "MASTER_PORT",
                hint: " (nor SLURM_JOB_ID to derive it from)",
            })?;
            let id: u64 = number("SLURM_JOB_ID", &job)?;
            // Below 40000 and above 19999: fits a u16.
            (20000 + id % 20000) as u16
        }
    };
    Ok(places.launch(l, addr, port))
}

fn mpi<F: Fn(&str) -> Option<String>>(v: &Vars<F>) -> Result<Launch> {
    let l = Launcher::Mpi;
    let names = if v.get("OMPI_COMM_WORLD_RANK").is_some() {
        [
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_SIZE",
        ]
    } else {
        ["PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"]
    };
    let places = Places {
        rank: (v.count(l, names[0])?, names[0]),
        world: (v.count(l, names[1])?, names[1]),
        local_rank: (v.count(l, names[2])?, names[2]),
        local_world: (v.count(l, names[3])?, names[3]),
    }
    .check()?;
    let addr = match v.get("MASTER_ADDR") {
        Some(a) => a,
        None if places.local_world.0 == places.world.0 => "127.0.0.1".to_owned(),
        None => {
            return Err(DistError::MpiMasterAddr {
                world: places.world.0,
                local_world: places.local_world.0,
            })
        }
    };
    let port = match v.get("MASTER_PORT") {
        Some(p) => port("MASTER_PORT", &p)?,
        None => 29500,
    };
    Ok(places.launch(l, addr, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn launch(vars: &[(&str, &str)]) -> Result<Option<Launch>> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Launch::from_vars(|k| map.get(k).cloned())
    }

    fn some(vars: &[(&str, &str)]) -> Launch {
        launch(vars).unwrap().unwrap()
    }

    /// The variable a `BadVar` or `MissingVar` names.
    fn err_var(vars: &[(&str, &str)]) -> &'static str {
        match launch(vars) {
            Err(DistError::BadVar { var, .. }) | Err(DistError::MissingVar { var, .. }) => var,
            other => panic!("expected a variable error, got {other:?}"),
        }
    }

    /// What torchrun --nproc-per-node 2 gives its second worker.
    const TORCHRUN: &[(&str, &str)] = &[
        ("TORCHELASTIC_RUN_ID", "none"),
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("LOCAL_RANK", "1"),
        ("LOCAL_WORLD_SIZE", "2"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "29500"),
        ("TORCHELASTIC_RESTART_COUNT", "3"),
        ("TORCHELASTIC_USE_AGENT_STORE", "True"),
    ];

    fn with(
        base: &[(&'static str, &'static str)],
        over: &[(&'static str, &'static str)],
    ) -> Vec<(&'static str, &'static str)> {
        let mut v: Vec<_> = base
            .iter()
            .filter(|(k, _)| !over.iter().any(|(o, _)| o == k))
            .copied()
            .collect();
        v.extend(over.iter().filter(|(_, val)| *val != "<unset>").copied());
        v
    }

    #[test]
    fn no_launcher_is_none() {
        assert_eq!(launch(&[]).unwrap(), None);
        assert_eq!(
            launch(&[("PATH", "/bin"), ("SLURM_JOB_ID", "7")]).unwrap(),
            None
        );
        // An empty value is unset, as in torch's env:// handler.
        assert_eq!(launch(&[("RANK", ""), ("WORLD_SIZE", "")]).unwrap(), None);
    }

    #[test]
    fn torchrun_reads_everything() {
        let l = some(TORCHRUN);
        assert_eq!(
            l,
            Launch {
                rank: 1,
                world: 2,
                local_rank: 1,
                local_world: 2,
                master_addr: "127.0.0.1".into(),
                master_port: 29500,
                launcher: Launcher::Torchrun,
                agent_store: true,
                restart_count: 3,
            }
        );
    }

    #[test]
    fn torchrun_agent_store_is_exactly_true_and_restart_defaults_to_zero() {
        let l = some(&with(
            TORCHRUN,
            &[
                ("TORCHELASTIC_USE_AGENT_STORE", "true"),
                ("TORCHELASTIC_RESTART_COUNT", "<unset>"),
            ],
        ));
        assert!(!l.agent_store);
        assert_eq!(l.restart_count, 0);
        let l = some(&with(
            TORCHRUN,
            &[("TORCHELASTIC_USE_AGENT_STORE", "False")],
        ));
        assert!(!l.agent_store);
    }

    #[test]
    fn torchrun_requires_its_variables() {
        for var in [
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            "LOCAL_WORLD_SIZE",
            "MASTER_ADDR",
            "MASTER_PORT",
        ] {
            let vars = with(TORCHRUN, &[(var, "<unset>")]);
            match launch(&vars) {
                Err(DistError::MissingVar {
                    launcher: Launcher::Torchrun,
                    var: v,
                    ..
                }) => {
                    assert_eq!(v, var)
                }
                other => panic!("{var} unset: {other:?}"),
            }
        }
        assert_eq!(
            err_var(&with(TORCHRUN, &[("TORCHELASTIC_RESTART_COUNT", "x")])),
            "TORCHELASTIC_RESTART_COUNT"
        );
    }

    const ENV: &[(&str, &str)] = &[
        ("RANK", "3"),
        ("WORLD_SIZE", "4"),
        ("MASTER_ADDR", "node0"),
        ("MASTER_PORT", "1234"),
    ];

    #[test]
    fn plain_env_is_one_node_without_local_variables() {
        let l = some(ENV);
        assert_eq!(l.launcher, Launcher::Env);
        assert_eq!((l.rank, l.world, l.local_rank, l.local_world), (3, 4, 3, 4));
        assert_eq!((l.master_addr.as_str(), l.master_port), ("node0", 1234));
        assert!(!l.agent_store);

        let l = some(&with(
            ENV,
            &[("LOCAL_RANK", "1"), ("LOCAL_WORLD_SIZE", "2")],
        ));
        assert_eq!((l.local_rank, l.local_world), (1, 2));
        assert_eq!(
            err_var(&with(ENV, &[("LOCAL_RANK", "1")])),
            "LOCAL_WORLD_SIZE"
        );
        assert_eq!(
            err_var(&with(ENV, &[("LOCAL_WORLD_SIZE", "2")])),
            "LOCAL_RANK"
        );
    }

    #[test]
    fn plain_env_requires_master_and_both_counts() {
        assert_eq!(
            err_var(&with(ENV, &[("MASTER_ADDR", "<unset>")])),
            "MASTER_ADDR"
        );
        assert_eq!(
            err_var(&with(ENV, &[("MASTER_PORT", "<unset>")])),
            "MASTER_PORT"
        );
        assert_eq!(
            err_var(&with(ENV, &[("WORLD_SIZE", "<unset>")])),
            "WORLD_SIZE"
        );
        assert_eq!(err_var(&with(ENV, &[("RANK", "<unset>")])), "RANK");
    }

    #[test]
    fn world_of_one_is_still_a_launch() {
        let l = some(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "1"),
            ("MASTER_ADDR", "localhost"),
            ("MASTER_PORT", "29500"),
        ]);
        assert_eq!((l.rank, l.world), (0, 1));
    }

    #[test]
    fn malformed_values_name_their_variable() {
        assert_eq!(err_var(&with(ENV, &[("RANK", "one")])), "RANK");
        assert_eq!(err_var(&with(ENV, &[("RANK", "-1")])), "RANK");
        assert_eq!(err_var(&with(ENV, &[("RANK", "4")])), "RANK"); // rank >= world
        assert_eq!(
            err_var(&with(ENV, &[("RANK", "0"), ("WORLD_SIZE", "0")])),
            "WORLD_SIZE"
        );
        assert_eq!(
            err_var(&with(ENV, &[("MASTER_PORT", "65536")])),
            "MASTER_PORT"
        );
        assert_eq!(err_var(&with(ENV, &[("MASTER_PORT", "0")])), "MASTER_PORT");
        assert_eq!(
            err_var(&with(ENV, &[("MASTER_PORT", "http")])),
            "MASTER_PORT"
        );
        assert_eq!(
            err_var(&with(
                ENV,
                &[("LOCAL_RANK", "2"), ("LOCAL_WORLD_SIZE", "2")]
            )),
            "LOCAL_RANK"
        );
        assert_eq!(
            err_var(&with(
                ENV,
                &[("LOCAL_RANK", "0"), ("LOCAL_WORLD_SIZE", "0")]
            )),
            "LOCAL_WORLD_SIZE"
        );
        assert_eq!(
            err_var(&with(
                ENV,
                &[("LOCAL_RANK", "0"), ("LOCAL_WORLD_SIZE", "8")]
            )),
            "LOCAL_WORLD_SIZE"
        ); // more on the node than in the world
        assert_eq!(err_var(&with(TORCHRUN, &[("WORLD_SIZE", "1")])), "RANK");
        let msg = launch(&with(ENV, &[("RANK", "4")]))
            .unwrap_err()
            .to_string();
        assert_eq!(msg, "RANK=\"4\": rank 4 is not below WORLD_SIZE=4");
    }

    /// `srun -N2 --ntasks-per-node=2` in an sbatch script, third task.
    const SLURM: &[(&str, &str)] = &[
        ("SLURM_JOB_ID", "123456"),
        ("SLURM_STEP_ID", "0"),
        ("SLURM_PROCID", "2"),
        ("SLURM_STEP_NUM_TASKS", "4"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_STEP_TASKS_PER_NODE", "2(x2)"),
        ("SLURM_LAUNCH_NODE_IPADDR", "10.0.0.5"),
        // Slurm's PMI sets these too; Slurm must win over MPI.
        ("PMI_RANK", "2"),
        ("PMI_SIZE", "4"),
    ];

    #[test]
    fn slurm_step() {
        let l = some(SLURM);
        assert_eq!(l.launcher, Launcher::Slurm);
        assert_eq!((l.rank, l.world, l.local_rank, l.local_world), (2, 4, 0, 2));
        assert_eq!(l.master_addr, "10.0.0.5");
        assert_eq!(l.master_port, 23456); // 20000 + 123456 % 20000

        let l = some(&with(
            SLURM,
            &[("MASTER_ADDR", "head"), ("MASTER_PORT", "4000")],
        ));
        assert_eq!((l.master_addr.as_str(), l.master_port), ("head", 4000));

        let l = some(&with(
            SLURM,
            &[
                ("SLURM_STEP_TASKS_PER_NODE", "<unset>"),
                ("SLURM_NTASKS_PER_NODE", "3"),
            ],
        ));
        assert_eq!(l.local_world, 3);
        let l = some(&with(SLURM, &[("SLURM_STEP_TASKS_PER_NODE", "3,1")]));
        assert_eq!(l.local_world, 3);
    }

    #[test]
    fn slurm_batch_script_without_srun_is_single_process() {
        let batch = with(
            SLURM,
            &[("SLURM_STEP_ID", "<unset>"), ("PMI_RANK", "<unset>")],
        );
        assert_eq!(launch(&batch).unwrap(), None);
    }

    #[test]
    fn slurm_malformed_and_missing() {
        assert_eq!(
            err_var(&with(SLURM, &[("SLURM_LOCALID", "<unset>")])),
            "SLURM_LOCALID"
        );
        assert_eq!(
            err_var(&with(SLURM, &[("SLURM_PROCID", "x")])),
            "SLURM_PROCID"
        );
        assert_eq!(
            err_var(&with(SLURM, &[("SLURM_PROCID", "4")])),
            "SLURM_PROCID"
        );
        assert_eq!(
            err_var(&with(SLURM, &[("SLURM_STEP_TASKS_PER_NODE", "(x2)")])),
            "SLURM_STEP_TASKS_PER_NODE"
        );
        assert_eq!(
            err_var(&with(SLURM, &[("SLURM_STEP_TASKS_PER_NODE", "<unset>")])),
            "SLURM_STEP_TASKS_PER_NODE"
        );
        assert_eq!(
            err_var(&with(SLURM, &[("SLURM_LAUNCH_NODE_IPADDR", "<unset>")])),
            "MASTER_ADDR"
        );
        assert_eq!(
            err_var(&with(SLURM, &[("SLURM_JOB_ID", "<unset>")])),
            "MASTER_PORT"
        );
        assert_eq!(
            err_var(&with(SLURM, &[("SLURM_JOB_ID", "abc")])),
            "SLURM_JOB_ID"
        );
    }

    #[test]
    fn env_variables_win_over_slurm() {
        let l = some(&with(SLURM, ENV));
        assert_eq!(l.launcher, Launcher::Env);
        assert_eq!(l.rank, 3);
    }

    const OMPI: &[(&str, &str)] = &[
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "2"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
    ];

    const HYDRA: &[(&str, &str)] = &[
        ("PMI_RANK", "5"),
        ("PMI_SIZE", "8"),
        ("MPI_LOCALRANKID", "1"),
        ("MPI_LOCALNRANKS", "4"),
    ];

    #[test]
    fn open_mpi_on_one_node_defaults_to_loopback() {
        let l = some(OMPI);
        assert_eq!(l.launcher, Launcher::Mpi);
        assert_eq!((l.rank, l.world, l.local_rank, l.local_world), (1, 2, 1, 2));
        assert_eq!(
            (l.master_addr.as_str(), l.master_port),
            ("127.0.0.1", 29500)
        );
        let l = some(&with(OMPI, &[("MASTER_PORT", "4242")]));
        assert_eq!(l.master_port, 4242);
    }

    #[test]
    fn mpich_over_nodes_needs_master_addr() {
        match launch(HYDRA) {
            Err(
                e @ DistError::MpiMasterAddr {
                    world: 8,
                    local_world: 4,
                },
            ) => {
                assert!(e.to_string().contains("-x MASTER_ADDR"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        let l = some(&with(HYDRA, &[("MASTER_ADDR", "n0")]));
        assert_eq!((l.rank, l.world, l.local_rank, l.local_world), (5, 8, 1, 4));
        assert_eq!((l.master_addr.as_str(), l.master_port), ("n0", 29500));
    }

    #[test]
    fn mpi_malformed_and_missing() {
        assert_eq!(
            err_var(&with(OMPI, &[("OMPI_COMM_WORLD_LOCAL_SIZE", "<unset>")])),
            "OMPI_COMM_WORLD_LOCAL_SIZE"
        );
        assert_eq!(
            err_var(&with(OMPI, &[("OMPI_COMM_WORLD_SIZE", "two")])),
            "OMPI_COMM_WORLD_SIZE"
        );
        assert_eq!(
            err_var(&with(HYDRA, &[("MPI_LOCALRANKID", "<unset>")])),
            "MPI_LOCALRANKID"
        );
        assert_eq!(err_var(&with(HYDRA, &[("PMI_RANK", "8")])), "PMI_RANK");
        assert_eq!(
            err_var(&with(OMPI, &[("MASTER_PORT", "99999")])),
            "MASTER_PORT"
        );
    }
}
