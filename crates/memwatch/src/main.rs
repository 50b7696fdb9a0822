//! The `memwatch` binary: the same command line as `colosched memwatch` and
//! `colosched-agent memwatch` (docs/memwatch.md).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(colosched_memwatch::cli::main(&args));
}
