DROP TABLE ax_instance;
DROP TABLE ax_task;
