//! The `episodic-eval` binary: parses the command line and runs one evaluation.

use std::process::ExitCode;

use clap::Parser;

use episodic_eval::Dataset;

#[derive(Parser)]
#[command(
    name = "episodic-eval",
    version,
    about = "Offline quality evaluation of the episodic engine (LoCoMo, MADial-Bench, observe, scenarios)"
)]
struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, env = "EPISODIC_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Which evaluation to run.
    #[command(subcommand)]
    dataset: Dataset,
}

fn main() -> ExitCode {
    // Reports and scratch data directories are written owner-only, as the server writes its
    // files.
    episodic::fsutil::owner_only_umask();
    let cli = Cli::parse();
    episodic::telemetry::init_logging(&cli.log_format);
    match episodic_eval::run(cli.dataset) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
