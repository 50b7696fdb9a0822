//! The static `colosched-agent` binary: the same command line as `colosched agent`.

fn main() {
    std::process::exit(colosched_agent::cli::main(
        std::env::args().skip(1).collect(),
    ));
}
