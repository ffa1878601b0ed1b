use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = lvms::cli::Cli::parse();
    match lvms::cli::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("lvms: {err:#}");
            ExitCode::FAILURE
        }
    }
}
