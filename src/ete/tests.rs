//! ETE unit tests: hand-built byte streams, exact packets and elements.
