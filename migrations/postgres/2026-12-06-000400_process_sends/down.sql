DROP TABLE ax_process;
