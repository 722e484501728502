"""The SSD head: anchors and their box coder, its model head, loss, decoding and TFLite's post-processing op."""
