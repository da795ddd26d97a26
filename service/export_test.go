package service

// ShownThread is what request logs show for thread, under mode and salt.
func ShownThread(mode ThreadIDLogging, salt []byte, thread string) string {
	return newThreadTagger(mode, salt).tag(thread).shown
}
