//! The launch environment: who this process is in the job, read from the variables torchrun
//! sets (and that SLURM and most schedulers can be mapped to; see docs/DISTRIBUTED.md).
//! Checked before any model is loaded, so a bad launch fails in milliseconds and names the
//! variable.

/// This process's place in a multi-process job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// `RANK`: 0-based index of this process in the job.
    pub rank: usize,
    /// `WORLD_SIZE`: number of processes.
    pub world: usize,
    /// `LOCAL_RANK`: index on this machine (picks the GPU); `RANK` when unset.
    pub local_rank: usize,
    /// `LOCAL_WORLD_SIZE`: processes on this machine (torchrun's `--nproc-per-node`); at
    /// least `local_rank + 1` when unset.
    pub local_world: usize,
    /// `MASTER_ADDR`: where rank 0 (or torchrun's agent) serves the rendezvous store.
    pub master_addr: String,
    /// `MASTER_PORT`.
    pub master_port: u16,
    /// `TORCHELASTIC_USE_AGENT_STORE=True`: torchrun's agent hosts the store; nobody else does.
    pub agent_store: bool,
    /// `TORCHELASTIC_RESTART_COUNT`: how many times torchrun restarted the group.
    pub restart: u64,
}

/// A launch environment that cannot be right.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    #[error("environment variable {var} is {value:?}; expected {expected}")]
    Invalid {
        var: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error(
        "environment variable {set} is set but {missing} is not; a multi-process launch \
             (torchrun, or your scheduler) sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT"
    )]
    Missing {
        set: &'static str,
        missing: &'static str,
    },
    #[error("RANK is {rank} but WORLD_SIZE is {world}: ranks run from 0 to WORLD_SIZE - 1")]
    RankOutside { rank: usize, world: usize },
}

fn number<T: std::str::FromStr>(
    var: &'static str,
    value: String,
    expected: &'static str,
) -> Result<T, LaunchError> {
    value.trim().parse().map_err(|_| LaunchError::Invalid {
        var,
        value,
        expected,
    })
}

impl Launch {
    /// The launch this process's environment describes; `None` for a plain single process
    /// (neither `WORLD_SIZE` nor `RANK` set, or `WORLD_SIZE=1`).
    pub fn from_env() -> Result<Option<Launch>, LaunchError> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// [`Launch::from_env`] over any variable lookup (tests).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Launch>, LaunchError> {
        let (world, rank) = match (var("WORLD_SIZE"), var("RANK")) {
            (None, None) => return Ok(None),
            (Some(_), None) => {
                return Err(LaunchError::Missing {
                    set: "WORLD_SIZE",
                    missing: "RANK",
                })
            }
            (None, Some(_)) => {
                return Err(LaunchError::Missing {
                    set: "RANK",
                    missing: "WORLD_SIZE",
                })
            }
            (Some(w), Some(r)) => (w, r),
        };
        let world: usize = number("WORLD_SIZE", world, "a whole number >= 1")?;
        if world == 0 {
            return Err(LaunchError::Invalid {
                var: "WORLD_SIZE",
                value: "0".into(),
                expected: "a whole number >= 1",
            });
        }
        let rank: usize = number("RANK", rank, "a whole number in 0..WORLD_SIZE")?;
        if rank >= world {
            return Err(LaunchError::RankOutside { rank, world });
        }
        if world == 1 {
            return Ok(None);
        }
        let local_rank = match var("LOCAL_RANK") {
            Some(v) => number("LOCAL_RANK", v, "a whole number")?,
            None => rank,
        };
        let local_world = match var("LOCAL_WORLD_SIZE") {
            Some(v) => number("LOCAL_WORLD_SIZE", v, "a whole number")?,
            None => local_rank + 1,
        };
        let master_addr = var("MASTER_ADDR").ok_or(LaunchError::Missing {
            set: "WORLD_SIZE",
            missing: "MASTER_ADDR",
        })?;
        if master_addr.trim().is_empty() {
            return Err(LaunchError::Invalid {
                var: "MASTER_ADDR",
                value: master_addr,
                expected: "a host name or address",
            });
        }
        let master_port = var("MASTER_PORT").ok_or(LaunchError::Missing {
            set: "WORLD_SIZE",
            missing: "MASTER_PORT",
        })?;
        let master_port: u16 = number("MASTER_PORT", master_port, "a TCP port (1-65535)")?;
        if master_port == 0 {
            return Err(LaunchError::Invalid {
                var: "MASTER_PORT",
                value: "0".into(),
                expected: "a TCP port (1-65535)",
            });
        }
        let agent_store = var("TORCHELASTIC_USE_AGENT_STORE")
            .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
        let restart = match var("TORCHELASTIC_RESTART_COUNT") {
            Some(v) => number("TORCHELASTIC_RESTART_COUNT", v, "a whole number")?,
            None => 0,
        };
        Ok(Some(Launch {
            rank,
            world,
            local_rank,
            local_world: local_world.max(local_rank + 1),
            master_addr: master_addr.trim().to_string(),
            master_port,
            agent_store,
            restart,
        }))
    }

    /// Whether this process hosts the rendezvous store.
    pub fn serves_store(&self) -> bool {
        self.rank == 0 && !self.agent_store
    }

    /// Key prefix in the store: one per torchrun attempt, as torch's own `env://` init does.
    pub fn store_prefix(&self) -> String {
        format!("/nest/attempt_{}/", self.restart)
    }

    /// Whether this process prints progress and writes files shared by the job.
    pub fn is_main(&self) -> bool {
        self.rank == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(vars: &[(&str, &str)]) -> Result<Option<Launch>, LaunchError> {
        Launch::from_vars(|k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_string())
        })
    }

    const OK: [(&str, &str); 4] = [
        ("WORLD_SIZE", "2"),
        ("RANK", "1"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "29500"),
    ];

    #[test]
    fn plain_process_and_full_launch() {
        assert_eq!(launch(&[]).unwrap(), None);
        assert_eq!(launch(&[("WORLD_SIZE", "1"), ("RANK", "0")]).unwrap(), None);
        let l = launch(&OK).unwrap().unwrap();
        assert_eq!(
            (l.rank, l.world, l.local_rank, l.local_world, l.master_port),
            (1, 2, 1, 2, 29500)
        );
        assert!(!l.serves_store());
        // torchrun's LOCAL_WORLD_SIZE: the processes on this machine (each needs a GPU of its own)
        let mut two_hosts = OK.to_vec();
        two_hosts.extend([("LOCAL_RANK", "0"), ("LOCAL_WORLD_SIZE", "1")]);
        assert_eq!(launch(&two_hosts).unwrap().unwrap().local_world, 1);
    }

    #[test]
    fn every_bad_environment_names_its_variable() {
        let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
            (vec![("WORLD_SIZE", "2")], "RANK"),
            (vec![("RANK", "0")], "WORLD_SIZE"),
            (vec![("WORLD_SIZE", "two"), ("RANK", "0")], "WORLD_SIZE"),
            (vec![("WORLD_SIZE", "0"), ("RANK", "0")], "WORLD_SIZE"),
            (vec![("WORLD_SIZE", "2"), ("RANK", "2")], "RANK is 2"),
            (vec![("WORLD_SIZE", "2"), ("RANK", "-1")], "RANK"),
            (vec![("WORLD_SIZE", "2"), ("RANK", "0")], "MASTER_ADDR"),
            (
                vec![("WORLD_SIZE", "2"), ("RANK", "0"), ("MASTER_ADDR", "h")],
                "MASTER_PORT",
            ),
            (
                vec![
                    ("WORLD_SIZE", "2"),
                    ("RANK", "0"),
                    ("MASTER_ADDR", "h"),
                    ("MASTER_PORT", "99999"),
                ],
                "MASTER_PORT",
            ),
        ];
        for (vars, needle) in cases {
            let e = launch(&vars).unwrap_err().to_string();
            assert!(e.contains(needle), "{vars:?}: {e}");
        }
        let mut bad = OK.to_vec();
        bad.push(("LOCAL_RANK", "x"));
        assert!(launch(&bad).unwrap_err().to_string().contains("LOCAL_RANK"));
        let mut bad = OK.to_vec();
        bad.push(("LOCAL_WORLD_SIZE", "-2"));
        assert!(launch(&bad)
            .unwrap_err()
            .to_string()
            .contains("LOCAL_WORLD_SIZE"));
    }
}
