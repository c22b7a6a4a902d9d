# Sourced by the measuring scripts, from the checkout's root: builds the release binary and
# sets `bin` to it, and `work` to a temporary folder removed when the script exits.
cargo build --release --locked --quiet
bin=$PWD/target/release/gpulint
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
