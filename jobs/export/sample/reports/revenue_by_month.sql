-- title: Revenue by month
-- source: shop
-- param: year int "Year" = 2025
-- sheet: Revenue
-- Paid revenue and order counts per month of one year.
SELECT strftime('%Y-%m', created_at) AS month,
       count(*) AS orders,
       sum(quantity) AS items,
       round(sum(total), 2) AS revenue,
       round(avg(total), 2) AS average_order
FROM orders
WHERE paid AND strftime('%Y', created_at) = printf('%04d', :year)
GROUP BY month
ORDER BY month;
