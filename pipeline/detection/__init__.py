"""Object detection: data readers (COCO, YOLO, TFRecords, the built-in `shapes`), the box-keeping input
pipeline, SSD anchors and their box coder, the training loss and COCO evaluation."""
