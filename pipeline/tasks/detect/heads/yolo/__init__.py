"""The anchor-free head of the YOLOv8 family: its model head, loss, assignment, export tail, host decoding and import."""
