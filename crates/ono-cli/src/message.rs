//! What an `ono` process tells the `ono` that started it, in the manner of cargo's
//! `machine_message.rs`.
//!
//! The contract:
//! - a child started with [`FLAG`] prints each thing it has to say as one JSON object on one line
//!   of its standard output, tagged by `reason` ([`Message`]); its result when it succeeds, and
//!   when it fails the error, a refusal ([`Message::Refused`]: the architecture cannot take these
//!   data) kept apart from every other failure ([`Message::Failed`]);
//! - standard error stays for people (progress, warnings) and is never read back; nor is the
//!   exit status, beyond telling a process that was killed ([`Ended::Killed`]: the kernel's
//!   out-of-memory killer, most likely) from one that ended without a word ([`Ended::Silent`]);
//! - one spawner ([`run`]) reads them, so that every parent (`compare`, `reproduce` and its
//!   budget) sees a child's end as the same typed value.
//!
//! Without the flag a command prints its result as it always has (the bare JSON line of
//! [`StepReport`], [`BatchReport`] or [`Summary`]), for people and scripts.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use ono_train::bench_step::StepReport;
use ono_train::bench_train::BatchReport;
use ono_train::Summary;

/// The flag that asks a child `ono` for messages (a global flag of the command line).
pub const FLAG: &str = "--messages";

/// The exit status of `ono` for a run whose architecture refuses its data (for scripts; `ono`
/// itself reads [`Message::Refused`]).
pub const REFUSED_EXIT: u8 = 3;

/// One thing a child `ono` says (see the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum Message {
    /// `ono bench-step`: its timed steps.
    StepTimes(StepReport),
    /// `ono bench-train`: its timed batches.
    BatchTimes(BatchReport),
    /// `ono train`: the finished run (rank 0's, under a launcher).
    Trained(Summary),
    /// The architecture cannot take these data, whatever the run's settings: why.
    Refused { why: String },
    /// Any other failure: the error and its causes, outermost first.
    Failed { causes: Vec<String> },
}

impl Message {
    /// The message of a command that failed with `e`: [`Message::Refused`] when an
    /// architecture refused its input somewhere in the chain, else [`Message::Failed`].
    pub fn of_error(e: &anyhow::Error) -> Message {
        let refusal = e.chain().find_map(|c| {
            c.downcast_ref::<ono_train::Error>()
                .and_then(ono_train::Error::refused_input)
                .map(ToString::to_string)
        });
        match refusal {
            Some(why) => Message::Refused { why },
            None => Message::Failed {
                causes: e.chain().map(ToString::to_string).collect(),
            },
        }
    }

    /// Prints the message on one line of standard output.
    pub fn print(&self) -> Result<()> {
        println!("{}", serde_json::to_string(self)?);
        Ok(())
    }

    /// Prints the result without its tag, as the commands print it for people and scripts;
    /// refusals and failures are not results and print nothing here.
    pub fn print_plain(&self) -> Result<()> {
        let line = match self {
            Message::StepTimes(r) => serde_json::to_string(r)?,
            Message::BatchTimes(r) => serde_json::to_string(r)?,
            Message::Trained(s) => serde_json::to_string(s)?,
            Message::Refused { .. } | Message::Failed { .. } => return Ok(()),
        };
        println!("{line}");
        Ok(())
    }
}

/// How a child `ono` ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// It said this last (a refusal or failure said by any process comes first: under a
    /// launcher, every rank may speak).
    Said(Message),
    /// A signal ended it before it said anything (SIGKILL: the out-of-memory killer, most
    /// likely).
    Killed { signal: i32 },
    /// It ended without a message: a crash before `main` could say anything. The last lines of
    /// its standard error, for the person reading the failure.
    Silent { status: String, stderr_tail: String },
}

impl Ended {
    /// The end in words, for a failure's reason.
    pub fn describe(&self) -> String {
        match self {
            Ended::Said(Message::Failed { causes }) => causes.join(": "),
            Ended::Said(Message::Refused { why }) => format!("refused: {why}"),
            Ended::Said(m) => format!("{m:?}"),
            Ended::Killed { signal } => format!(
                "killed by signal {signal}{}",
                if *signal == 9 {
                    " (out of memory, most likely)"
                } else {
                    ""
                }
            ),
            Ended::Silent {
                status,
                stderr_tail,
            } => format!("ended ({status}) without a message: {stderr_tail}"),
        }
    }
}

/// How often [`run`] calls its watcher while the child runs.
pub const WATCH_EVERY: Duration = Duration::from_millis(100);

/// Runs `cmd` (a child `ono`; [`FLAG`] is added) to its end and reads what it said. Its
/// standard error is passed through to ours, the last lines kept for [`Ended::Silent`].
/// `watch` is called with the child's pid every [`WATCH_EVERY`] while it runs (the budget
/// samples its GPU memory there).
pub fn run(mut cmd: Command, mut watch: impl FnMut(u32)) -> Result<Ended> {
    let shown = format!("{cmd:?}");
    let mut child = cmd
        .arg(FLAG)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {shown}"))?;
    let pid = child.id();
    // Both pipes drained on threads of their own, so that a full pipe never stalls the child.
    let stdout = child.stdout.take().context("no stdout")?;
    let stderr = child.stderr.take().context("no stderr")?;
    let said = std::thread::spawn(move || read_messages(stdout));
    let tail = std::thread::spawn(move || pass_through(stderr));
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        watch(pid);
        std::thread::sleep(WATCH_EVERY);
    };
    let messages = said
        .join()
        .map_err(|_| anyhow::anyhow!("reading {shown}'s messages panicked"))??;
    let stderr_tail = tail.join().unwrap_or_default();
    let first_refusal = messages
        .iter()
        .find(|m| matches!(m, Message::Refused { .. } | Message::Failed { .. }));
    if let Some(m) = first_refusal.or(messages.last()) {
        return Ok(Ended::Said(m.clone()));
    }
    if let Some(signal) = signal_of(&status) {
        return Ok(Ended::Killed { signal });
    }
    Ok(Ended::Silent {
        status: status.to_string(),
        stderr_tail,
    })
}

/// Every message on `out`; a line that is not one is an error (a child that prints anything
/// else on its standard output breaks the contract).
fn read_messages(out: impl Read) -> Result<Vec<Message>> {
    let mut messages = Vec::new();
    for line in BufReader::new(out).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        messages.push(
            serde_json::from_str(&line).with_context(|| {
                format!("a child ono printed a line that is no message: {line:?}")
            })?,
        );
    }
    Ok(messages)
}

/// Copies `err` to our standard error line by line; returns its last three non-empty lines.
fn pass_through(err: impl Read) -> String {
    let mut last: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    for line in BufReader::new(err)
        .lines()
        .map_while(std::result::Result::ok)
    {
        eprintln!("{line}");
        if !line.trim().is_empty() {
            if last.len() == 3 {
                last.pop_front();
            }
            last.push_back(line.trim().to_owned());
        }
    }
    Vec::from(last).join(" / ")
}

/// The signal that ended a process.
#[cfg(unix)]
fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(status)
}

#[cfg(not(unix))]
fn signal_of(_: &std::process::ExitStatus) -> Option<i32> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_with_their_tag() {
        let m = Message::Refused {
            why: "no padding mask".into(),
        };
        let line = serde_json::to_string(&m).unwrap();
        assert!(line.starts_with(r#"{"reason":"refused""#), "{line}");
        assert_eq!(serde_json::from_str::<Message>(&line).unwrap(), m);
        let f = Message::Failed {
            causes: vec!["in run.toml".into(), "no such file".into()],
        };
        let back: Message = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(Ended::Said(back).describe(), "in run.toml: no such file");
    }

    #[test]
    fn a_refusal_anywhere_in_the_chain_is_a_refusal() {
        let refused = ono_train::Error::Models(ono_models::Error::Unsupported {
            arch: "fno",
            what: "a padding mask",
        });
        let e = anyhow::Error::new(refused).context("in run.toml");
        assert!(matches!(Message::of_error(&e), Message::Refused { .. }));
        let other = anyhow::anyhow!("disk full").context("writing");
        assert_eq!(
            Message::of_error(&other),
            Message::Failed {
                causes: vec!["writing".into(), "disk full".into()]
            }
        );
    }

    #[test]
    fn stdout_that_is_not_messages_is_an_error() {
        let lines = "{\"reason\":\"refused\",\"why\":\"x\"}\n\nhello\n";
        assert!(read_messages(lines.as_bytes()).is_err());
        let ok = "{\"reason\":\"refused\",\"why\":\"x\"}\n";
        assert_eq!(read_messages(ok.as_bytes()).unwrap().len(), 1);
    }
}
