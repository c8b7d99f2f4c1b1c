//! The epoch loop of [`Trainer::run`], in the manner of burn's `learner/epoch.rs`: what a run
//! says when it starts ([`Trainer::announce`]), one epoch's batches ([`Trainer::train_epoch`]),
//! and the end of an epoch ([`Trainer::end_epoch`]: evaluation, the record, the best epoch,
//! checkpoints, metrics and the observer).

use std::time::Instant;

use ono_kernels::host;
use tch::Tensor;

use super::{epoch_batches, Summary, Trainer};
use crate::checkpoint::EpochRecord;
use crate::progress::Progress;
use crate::run_folder::Slot;
use crate::{Error, Result};

impl Trainer {
    /// Says how the run starts: the notes of its set-up, its processes, the step it resumes at.
    pub(super) fn announce(&mut self, progress: &Progress) -> Result<()> {
        for note in std::mem::take(&mut self.notes) {
            progress.println(&note);
        }
        if let (Some(p), Some(_)) = (&self.parallel, &self.point_norms) {
            progress.println(&format!(
                "point sharding: {} processes ({} launch), this one holding {} points of every \
                 sample; {} micro-batch(es) of the {}-sample batch",
                p.world(),
                p.launch().launcher,
                self.train.points(),
                self.accumulate,
                self.cfg.batch_size
            ));
        } else if let Some(p) = &self.parallel {
            progress.println(&format!(
                "data parallel: {} processes ({} launch), {} micro-batch(es) of the {}-sample \
                 batch in each",
                p.world(),
                p.launch().launcher,
                self.accumulate,
                self.cfg.batch_size
            ));
        }
        if self.resumed_at > 0 {
            progress.println(&format!(
                "resumed at step {} (epoch {}, batch {})",
                self.resumed_at,
                self.state.epoch + 1,
                self.state.batch_in_epoch
            ));
            // The metrics file may predate the checkpoint's history by one epoch.
            if self.is_leader() {
                self.folder.write_metrics(&self.state.history)?;
            }
        }
        Ok(())
    }

    /// Trains the rest of the current epoch's batches (all of them unless it resumed mid-way),
    /// saving the last checkpoint every `checkpoint.every_steps` batches; returns the learning
    /// rate of its last step. `started` and `seconds_before` time the epoch.
    pub(super) fn train_epoch(
        &mut self,
        progress: &Progress,
        started: Instant,
        seconds_before: f64,
    ) -> Result<f64> {
        let (epoch, epochs) = (self.state.epoch, self.cfg.epochs);
        let batches = epoch_batches(
            self.cfg.data.batch_order,
            self.train.len(),
            self.cfg.batch_size as usize,
            self.cfg.seed,
            epoch,
        );
        // The epoch's order goes to the device once; each batch narrows it (an upload per
        // batch would wait for the queued steps).
        let order = Tensor::f_from_slice(&batches.concat())?.f_to_device(self.train.fx.device())?;
        let starts: Vec<i64> = batches
            .iter()
            .scan(0, |start, b| {
                *start += b.len() as i64;
                Some(*start - b.len() as i64)
            })
            .collect();
        let mut lr = 0.0;
        while (self.state.batch_in_epoch as usize) < batches.len() {
            let i = self.state.batch_in_epoch as usize;
            let idx = &batches[i];
            let idx_on_device = order.f_narrow(0, starts[i], idx.len() as i64)?;
            let reads = host::host_reads();
            let result = {
                let _deferred = self.health.enter(self.state.global_step);
                // Gradients on even when the caller runs inside `no_grad`.
                tch::with_grad(|| self.train_batch(idx, &idx_on_device))
            };
            self.reads.in_steps += host::host_reads() - reads;
            self.unchecked = true;
            lr = match result {
                Ok(lr) => lr,
                Err(e) => {
                    // An earlier non-finite loss or failed check explains the failure better
                    // than the failure itself.
                    self.flush_losses()?;
                    return Err(Error::Step {
                        step: self.state.global_step,
                        epoch,
                        source: Box::new(e),
                    });
                }
            };
            if let Some(news) = self.graphs.as_mut().and_then(|g| g.take_news()) {
                progress.println(&news);
            }
            self.state.batch_in_epoch += 1;
            self.state.global_step += 1;
            let step = self.state.global_step;
            if step.is_multiple_of(self.cfg.log.every_steps) {
                self.flush_losses()?;
                let mean = self.state.epoch_loss_sum / self.state.epoch_samples.max(1) as f64;
                progress.update(epoch, epochs, step, mean, lr);
            }
            let every = self.cfg.checkpoint.every_steps;
            if every > 0
                && self.state.batch_in_epoch.is_multiple_of(every)
                && (self.state.batch_in_epoch as usize) < batches.len()
            {
                self.flush_losses()?;
                self.state.epoch_seconds = seconds_before + started.elapsed().as_secs_f64();
                self.save(Slot::Last)?;
            }
        }
        self.flush_losses()?;
        Ok(lr)
    }

    /// Ends the current epoch: the test error when due, the epoch's record and line, the best
    /// epoch, the state moved to the next epoch, the last (and best) checkpoint, the metrics
    /// and the observer.
    pub(super) fn end_epoch(
        &mut self,
        progress: &Progress,
        lr: f64,
        seconds_before: f64,
        started: Instant,
    ) -> Result<()> {
        let (epoch, epochs) = (self.state.epoch, self.cfg.epochs);
        let due = (epoch + 1).is_multiple_of(self.cfg.log.eval_every_epochs) || epoch + 1 == epochs;
        let test = if due {
            Some(self.evaluate_test()?)
        } else {
            None
        };
        if let Some(news) = self
            .eval_graphs
            .as_ref()
            .and_then(|g| g.borrow_mut().take_news())
        {
            progress.println(&news);
        }
        let record = EpochRecord {
            epoch,
            step: self.state.global_step,
            train_loss: self.state.epoch_loss_sum / self.state.epoch_samples.max(1) as f64,
            test_rel_l2: test.as_ref().map(|t| t.full),
            test_per_step: test.map(|t| t.per_step).unwrap_or_default(),
            lr,
            seconds: seconds_before + started.elapsed().as_secs_f64(),
        };
        progress.println(&format!(
            "epoch {}/{epochs}: train loss {:.4e}, test rel L2 {}, {:.1} s",
            epoch + 1,
            record.train_loss,
            record
                .test_rel_l2
                .map_or("-".into(), |v| format!("{v:.4e}")),
            record.seconds
        ));
        let improved = match (record.test_rel_l2, self.state.best) {
            (Some(e), Some((_, b))) => e < b,
            // A NaN error is no best epoch (and a best error is always a number).
            (Some(e), None) => !e.is_nan(),
            _ => false,
        };
        if improved {
            self.state.best = Some((epoch, record.test_rel_l2.unwrap_or(f64::NAN)));
        }
        self.state.history.push(record);
        self.state.epoch += 1;
        self.state.batch_in_epoch = 0;
        self.state.epoch_loss_sum = 0.0;
        self.state.epoch_samples = 0;
        self.state.epoch_seconds = 0.0;
        self.save(Slot::Last)?;
        if improved && self.cfg.checkpoint.keep_best {
            self.save(Slot::Best)?;
        }
        if self.is_leader() {
            self.folder.write_metrics(&self.state.history)?;
            self.notify_observer(epoch)?;
        }
        Ok(())
    }

    /// What the finished run reports.
    pub(super) fn summary(&self) -> Summary {
        let last_checkpoint = self.folder.checkpoint(Slot::Last);
        let (final_test, result_checkpoint) = match self.state.best {
            Some((_, err)) if self.cfg.checkpoint.select_best => {
                (Some(err), self.folder.checkpoint(Slot::Best))
            }
            _ => (
                self.state.history.last().and_then(|r| r.test_rel_l2),
                last_checkpoint.clone(),
            ),
        };
        Summary {
            graphs: self.graph_stats(),
            steps: self.state.global_step,
            final_test,
            best: self.state.best,
            last_checkpoint,
            result_checkpoint,
            resumed_at: self.resumed_at,
        }
    }
}
