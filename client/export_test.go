package client

// ResumeTrailer is resumeTrailer, for the tests to hold to
// testdata/defaults.json.
const ResumeTrailer = resumeTrailer
