"""Detection data: COCO, YOLO (Ultralytics layout), OD-API TFRecords and the built-in `shapes`, read into one in-memory
form, and the box-keeping input pipeline."""
